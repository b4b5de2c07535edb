#include "tests/coll/harness.hpp"

#include <fmt/format.h>

#include <latch>
#include <thread>

#include "lib/core/error.hpp"

namespace chorus::test {

std::vector<RankOutcome> run_ranks(int n, const RunOptions& options,
                                   const std::function<void(RankEnv&)>& body) {
  auto fabric = make_inproc_fabric(n);
  std::vector<RankOutcome> outcomes(static_cast<std::size_t>(n));
  std::vector<int> ranks;
  for (int r = 0; r < n; ++r)
    if (!options.participates || options.participates(r)) ranks.push_back(r);
  std::latch done(static_cast<std::ptrdiff_t>(ranks.size()));
  std::vector<std::thread> threads;
  threads.reserve(ranks.size());
  for (int r : ranks) {
    threads.emplace_back([&, r] {
      RankOutcome& out = outcomes[static_cast<std::size_t>(r)];
      out.ran = true;
      {
        RankEnv env(fabric, r, options);
        try {
          body(env);
        } catch (const Error& e) {
          out.code = e.code();
          out.message = e.what();
        } catch (const std::exception& e) {
          out.code = CHORUS_ERR_INTERNAL;
          out.message = std::string("unexpected exception: ") + e.what();
        }
        if (out.code != CHORUS_SUCCESS && options.abort_on_error) env.transport.abort(out.message);
        done.arrive_and_wait();
      }
    });
  }
  for (auto& t : threads) t.join();
  return outcomes;
}

CallSignature make_sig(CollectiveKind kind, uint64_t seq, uint64_t count, DataType dtype,
                       ReduceOp op, int64_t root) {
  CallSignature sig;
  sig.seq = seq;
  sig.count = count;
  sig.root = root;
  sig.kind = static_cast<uint8_t>(kind);
  sig.dtype = static_cast<uint8_t>(dtype);
  sig.op = static_cast<uint8_t>(op);
  return sig;
}

std::string failures(const std::vector<RankOutcome>& outcomes) {
  std::string out;
  for (std::size_t r = 0; r < outcomes.size(); ++r) {
    const auto& o = outcomes[r];
    if (o.ran && o.code != CHORUS_SUCCESS)
      out += fmt::format("rank {}: code {}: {}\n", r, static_cast<int>(o.code), o.message);
  }
  return out;
}

}  // namespace chorus::test
