// Runs N thread-ranks over an InprocFabric, each with its own transport,
// scratch pool and CollectiveContext. Rank bodies must not use Catch2
// assertions (not thread-safe): they fill buffers owned by the test, which
// checks them after run_ranks returns.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "collectives/context.hpp"
#include "lib/core/scratch.hpp"
#include "transports/transport.hpp"

namespace chorus::test {

enum class TransportKind { inproc, tcp };

// The coll_tests binary runs the sweeps over the in-process transport; the
// coll_tests_tcp binary is the same sources built with CHORUS_TEST_TCP, so
// every sweep also runs over real loopback TCP.
#ifdef CHORUS_TEST_TCP
inline constexpr TransportKind kDefaultTransport = TransportKind::tcp;
#else
inline constexpr TransportKind kDefaultTransport = TransportKind::inproc;
#endif

struct RunOptions {
  std::size_t segment_bytes = 64;
  std::chrono::milliseconds timeout{30000};
  int spin_us = 20;
  // After a rank's first error, abort the transport so the others fail promptly.
  bool abort_on_error = true;
  // Ranks for which this returns false never start (no thread, no transport).
  std::function<bool(int)> participates;
  TransportKind transport = kDefaultTransport;
};

struct RankOutcome {
  bool ran = false;
  chorus_result_t code = CHORUS_SUCCESS;
  std::string message;
};

class RankEnv {
 public:
  RankEnv(Transport& t, const RunOptions& options) : transport(t), options_(options) {}
  int rank() const { return transport.rank(); }
  int size() const { return transport.size(); }
  // A context for one call, its deadline starting now.
  CollectiveContext context(const CallSignature& sig) {
    return CollectiveContext{
        transport,       scratch, 1, sig, Deadline::after(options_.timeout), options_.segment_bytes,
        options_.spin_us};
  }

  ScratchPool scratch;
  Transport& transport;

 private:
  const RunOptions& options_;
};

// Every rank's transport stays open until all bodies have returned, so an
// early finisher never turns a peer's timeout into a peer failure.
std::vector<RankOutcome> run_ranks(int n, const RunOptions& options,
                                   const std::function<void(RankEnv&)>& body);

CallSignature make_sig(CollectiveKind kind, uint64_t seq, uint64_t count, DataType dtype,
                       ReduceOp op = ReduceOp::sum, int64_t root = -1);

// "" when every started rank succeeded; else one line per failed rank.
std::string failures(const std::vector<RankOutcome>& outcomes);

}  // namespace chorus::test
