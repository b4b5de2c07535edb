// Allreduce with its buffers in parts (collectives/scattered.hpp) through
// every algorithm that takes parts over this binary's transport (shm over
// shared memory, the ring over any transport), 2-4 ranks, with 64-byte
// pieces and a 256-byte latency path: parts from one element to several
// pieces, pieces that span many parts, parts in place and not, and every
// rank with its own cut of the same call (each rank's layout is its own
// business, one buffer included). Sum, max and avg against an independent
// reference; every part's guard zones intact.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <string>
#include <vector>

#include "collectives/registry.hpp"
#include "collectives/scattered.hpp"
#include "tests/coll/check_util.hpp"
#include "tests/coll/guarded.hpp"
#include "tests/coll/harness.hpp"

using namespace chorus;
using namespace chorus::test;

namespace parts_test {

// Small integers: every sum over up to 8 ranks is exact in float32, and the
// ranks differ at every element; an average is that sum divided once.
float input(int rank, std::size_t i) {
  return static_cast<float>(static_cast<int>((7 * rank + 3 * i) % 101) - 50);
}

float expected(int ranks, std::size_t i, ReduceOp op) {
  float out = input(0, i);
  for (int r = 1; r < ranks; ++r)
    out = op == ReduceOp::max ? std::max(out, input(r, i)) : out + input(r, i);
  // The exact sum divided once, as the owner of each chunk or piece does.
  return op == ReduceOp::avg ? out / static_cast<float>(ranks) : out;
}

struct RankParts {
  std::vector<Guarded<float>> send, recv;  // recv only for parts not in place
  std::vector<bool> in_place;
};

// Rank r cuts the call as `layout` rotated by r; part k is in place when
// (k + r) % 3 == 0.
RankParts cut(const std::vector<std::size_t>& layout, int rank) {
  std::vector<std::size_t> sizes = layout;
  std::rotate(sizes.begin(), sizes.begin() + rank % static_cast<int>(sizes.size()), sizes.end());
  RankParts p;
  std::size_t at = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    p.in_place.push_back((k + static_cast<std::size_t>(rank)) % 3 == 0);
    p.send.emplace_back(sizes[k]);
    p.recv.emplace_back(p.in_place.back() ? 0 : sizes[k]);
    for (std::size_t i = 0; i < sizes[k]; ++i) {
      p.send.back()[i] = input(rank, at + i);
      if (!p.in_place.back()) p.recv.back()[i] = unlike(0.0f);
    }
    at += sizes[k];
  }
  return p;
}

// With `whole_rank0`, rank 0 holds the call in one buffer (no parts: the
// algorithm's ordinary path) while the others hold it in parts: the same
// messages either way.
std::string check(int n, const std::vector<std::size_t>& layout, ReduceOp op, std::string_view algo,
                  bool whole_rank0) {
  const std::size_t count = std::accumulate(layout.begin(), layout.end(), std::size_t{0});
  std::vector<RankParts> ranks;
  for (int r = 0; r < n; ++r)
    ranks.push_back(cut(whole_rank0 && r == 0 ? std::vector<std::size_t>{count} : layout, r));
  RunOptions o;
  o.timeout = std::chrono::milliseconds(20000);
  auto outcomes = run_ranks(n, o, [&](RankEnv& env) {
    RankParts& mine = ranks[static_cast<std::size_t>(env.rank())];
    ScatteredBuffers parts;
    for (std::size_t k = 0; k < mine.send.size(); ++k)
      parts.add(mine.send[k].data(), mine.in_place[k] ? mine.send[k].data() : mine.recv[k].data(),
                mine.send[k].size() * sizeof(float));
    CollectiveCall call;
    call.kind = CollectiveKind::allreduce;
    call.count = count;
    call.dtype = DataType::f32;
    call.op = op;
    if (whole_rank0 && env.rank() == 0) {
      call.send = mine.send[0].data();
      call.recv = mine.in_place[0] ? mine.send[0].data() : mine.recv[0].data();
    } else {
      call.scattered = &parts;
    }
    run_registered(env, call, algo);
  });
  if (auto f = failures(outcomes); !f.empty()) return f;
  for (int r = 0; r < n; ++r) {
    RankParts& mine = ranks[static_cast<std::size_t>(r)];
    std::size_t at = 0;
    for (std::size_t k = 0; k < mine.send.size(); ++k) {
      Guarded<float>& out = mine.in_place[k] ? mine.send[k] : mine.recv[k];
      for (std::size_t i = 0; i < out.size(); ++i)
        if (out[i] != expected(n, at + i, op))
          return fmt::format("rank {} part {} element {} (call element {}): {} where {} was due", r,
                             k, i, at + i, out[i], expected(n, at + i, op));
      for (auto* g : {&mine.send[k], &mine.recv[k]})
        if (auto damage = g->guard_damage(fmt::format("rank {} part {}", r, k)); !damage.empty())
          return damage;
      at += out.size();
    }
  }
  return "";
}

}  // namespace parts_test

using namespace parts_test;

TEST_CASE("allreduce in parts: pieces across parts, in place and not, a cut per rank",
          "[allreduce][parts]") {
  std::vector<std::string_view> taking;
  for (std::string_view algo : runnable_algorithms(CollectiveKind::allreduce))
    if (find_algorithm(CollectiveKind::allreduce, algo)->takes_parts) taking.push_back(algo);
  if (taking.empty()) {
    SUCCEED("no allreduce algorithm over this transport takes parts (the communicator packs)");
    return;
  }
  const std::vector<std::vector<std::size_t>> layouts = {
      {1},                               // one element, the latency path
      {3, 5, 7, 1, 20},                  // the latency path, in parts
      {1, 15, 16, 17, 33, 2, 100, 7},    // the pipeline: parts across pieces
      {300},                             // the pipeline, one part
      std::vector<std::size_t>(200, 1),  // a piece spans 16 parts
      {16, 16, 16, 16, 16, 16, 16, 16},  // parts that are pieces
      {1000, 1, 1, 999},                 // long parts, rounds within one
  };
  for (std::string_view algo : taking)
    for (int n : {2, 3, 4})
      for (std::size_t l = 0; l < layouts.size(); ++l)
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg})
          for (bool whole_rank0 : {false, true}) {
            INFO(algo << ", " << n << " ranks, layout " << l << ", " << op_name(op)
                      << (whole_rank0 ? ", rank 0 in one buffer" : ""));
            REQUIRE(check(n, layouts[l], op, algo, whole_rank0) == "");
          }
}
