// Algorithm selection over the registry: the CHORUS_ALGO grammar, the cost
// model, refusals and fallback, and the registry's own invariants.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "base/core/error.hpp"
#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/shm/domain.hpp"
#include "collectives/team.hpp"
#include "collectives/tuner/selection.hpp"
#include "tests/coll/plan_support.hpp"

using namespace chorus;
using namespace chorus::test;

namespace {

std::string_view chosen(CollectiveKind kind, std::size_t bytes, const Team& team,
                        const AlgoOverride& user, const CostModel& model) {
  return select_algorithm(call_of(kind), bytes, team, user, model).spec->name;
}

}  // namespace

TEST_CASE("CHORUS_ALGO: rules cover [lo, hi) per collective", "[tuner]") {
  auto o =
      AlgoOverride::parse("allreduce:0-64K:recursive_doubling,64K-inf:ring;broadcast:0-inf:ring");
  CHECK(o.lookup(CollectiveKind::allreduce, 0)->name == "recursive_doubling");
  CHECK(o.lookup(CollectiveKind::allreduce, 65535)->name == "recursive_doubling");
  CHECK(o.lookup(CollectiveKind::allreduce, 65536)->name == "ring");
  CHECK(o.lookup(CollectiveKind::allreduce, std::size_t(1) << 40)->name == "ring");
  CHECK(o.lookup(CollectiveKind::broadcast, 10)->name == "ring");
  CHECK(o.lookup(CollectiveKind::broadcast, 10)->kind == CollectiveKind::broadcast);
  CHECK(o.lookup(CollectiveKind::allgather, 10) == nullptr);
  CHECK(AlgoOverride::parse("").empty());
  auto gap = AlgoOverride::parse("allreduce:1K-2K:ring");
  CHECK(gap.lookup(CollectiveKind::allreduce, 512) == nullptr);
}

TEST_CASE("CHORUS_ALGO: malformed text or an unknown algorithm is refused naming it", "[tuner]") {
  for (const char* bad :
       {"allreduce", "allreduce:0-64K", "allreduce:64K-0:ring", "allreduce:0-1K:tree",
        "gather:0-inf:ring", "allreduce:x-1K:ring", "broadcast:0-inf:recursive_doubling",
        "send:0-inf:ring", "nosuch:0-inf:ring"}) {
    INFO(bad);
    CHECK_THROWS_AS(AlgoOverride::parse(bad), UsageError);
  }
  try {
    AlgoOverride::parse("allreduce:0-inf:bogus_algo");
    FAIL("accepted");
  } catch (const UsageError& e) {
    CHECK_THAT(e.what(), Catch::Contains("bogus_algo") && Catch::Contains("ring") &&
                             Catch::Contains("recursive_doubling"));
  }
}

TEST_CASE(
    "cost model: latency-bound sizes take recursive doubling, large ones the ring or, on a power "
    "of two, Rabenseifner",
    "[tuner]") {
  const AlgoOverride none;
  for (int ranks : {2, 3, 4, 5, 7, 8}) {
    for (int on_host : {ranks, 1}) {
      CostModel m = CostModel::defaults(on_host, 2);
      INFO("ranks " << ranks << ", " << on_host << " on this host");
      const Team team = plan_team(ranks);
      CHECK(chosen(CollectiveKind::allreduce, 8, team, none, m) == "recursive_doubling");
      // Both move 2 (n - 1) / n of the buffer per rank; Rabenseifner in
      // 2 log2(n) steps rather than 2 (n - 1), but only a power of two
      // avoids its fold (a whole buffer more). With 2 ranks both are one
      // exchange of halves each way: the same estimate, either may win.
      const auto big = chosen(CollectiveKind::allreduce, 64 << 20, team, none, m);
      if (ranks == 2)
        CHECK((big == "ring" || big == "rabenseifner"));
      else if (ranks == 4 || ranks == 8)
        CHECK(big == "rabenseifner");
      else
        CHECK(big == "ring");
    }
  }
  // Oversubscription makes steps dearer, so the crossover moves up.
  auto crossover = [&](int ranks, CostModel m) {
    std::size_t b = 8;
    while (chosen(CollectiveKind::allreduce, b, plan_team(ranks), none, m) == "recursive_doubling")
      b *= 2;
    return b;
  };
  CHECK(crossover(8, CostModel::defaults(8, 2)) > crossover(8, CostModel::defaults(2, 2)));
  // The override wins over the model.
  auto forced = AlgoOverride::parse("allreduce:0-inf:ring");
  auto s = select_algorithm(call_of(CollectiveKind::allreduce), 8, plan_team(4), forced,
                            CostModel{}, true);
  CHECK(s.spec->name == "ring");
  CHECK(s.forced);
  CHECK_THAT(s.why(), Catch::Contains("CHORUS_ALGO chose ring"));
}

TEST_CASE("cost model: a step that leaves ranks asleep does not pay the crowd's wake-ups",
          "[tuner]") {
  // 3 ranks on 2 cores: the fold of recursive doubling and its exchange run
  // 2 ranks at a time, the ring's steps all 3 (measured over loopback TCP:
  // 4.5 us against 10-11 us a step).
  const CostModel crowded = CostModel::defaults(3, 2);
  CHECK(crowded.alpha_us == Approx(30));
  CHECK(crowded.with_running_share(2.0 / 3).alpha_us == Approx(CostModel::kAlphaUs));
  CHECK(crowded.with_running_share(2.0 / 3).shm_alpha_us == Approx(CostModel::kShmAlphaUs));
  CHECK(crowded.with_running_share(1).alpha_us == Approx(30));
  // Its rates were those of every rank running: 2 of 3 get 1.5x as much core.
  CHECK(crowded.with_running_share(2.0 / 3).us_per_byte == Approx(CostModel::kUsPerByte / 1.5));
  CHECK(crowded.with_running_share(2.0 / 3).reduce_us_per_byte ==
        Approx(CostModel::kReduceUsPerByte / 1.5));
  CHECK(crowded.with_running_share(1).us_per_byte == Approx(CostModel::kUsPerByte));
  // 8 on 2 cores, half of them running: still crowded, less so.
  CHECK(CostModel::defaults(8, 2).with_running_share(0.5).alpha_us == Approx(40));
  // Configured costs (chorus-sim's links) are scaled, not replaced.
  CostModel configured = CostModel::defaults(3, 2);
  configured.alpha_us = 6;
  configured.us_per_byte = 0.0003;
  CHECK(configured.with_running_share(2.0 / 3).alpha_us == Approx(2));
  CHECK(configured.with_running_share(2.0 / 3).us_per_byte == Approx(0.0002));
  // A model that is not crowded keeps its latencies (measured ones too).
  CostModel measured = CostModel::defaults(2, 2);
  measured.alpha_us = 3;
  CHECK(measured.with_running_share(0.5).alpha_us == Approx(3));
  // So 3 ranks on 2 cores take recursive doubling for 64 and 128 KiB
  // (measured: 46-47 us against the ring's 71-77 us, 71-75 against 106-110);
  // 4 ranks, all running in every step of both, keep their crossover; the
  // largest sizes stay on the ring.
  const AlgoOverride none;
  for (std::size_t bytes : {std::size_t{64} << 10, std::size_t{128} << 10})
    CHECK(chosen(CollectiveKind::allreduce, bytes, plan_team(3), none, crowded) ==
          "recursive_doubling");
  CHECK(chosen(CollectiveKind::allreduce, 4 << 20, plan_team(3), none, crowded) == "ring");
  CHECK(chosen(CollectiveKind::allreduce, 64 << 10, plan_team(4), none,
               CostModel::defaults(4, 2)) == "recursive_doubling");
}

TEST_CASE("cost model: a fold's one-way transfers copy half an exchange's bytes per rank",
          "[tuner]") {
  const double bytes = 512 << 10;
  const Placement one_host, two_hosts{1, 2, 2, 1};
  // 3 ranks on 2 cores: the fold runs 2 ranks, on a core each.
  const CostModel crowded = CostModel::defaults(3, 2);
  const double us_per_byte = CostModel::kUsPerByte / 1.5,
               reduce = CostModel::kReduceUsPerByte / 1.5;
  CHECK(crowded.fold_in_and_out(one_host, 3, 2, bytes) ==
        Approx(2 * (CostModel::kAlphaUs + bytes * 0.5 * us_per_byte) + bytes * reduce));
  // Between hosts a one-way transfer has the link's bandwidth to itself.
  const CostModel two_of_three = crowded.with_running_share(2.0 / 3);
  CHECK(crowded.fold_in_and_out(two_hosts, 3, 2, bytes) ==
        Approx(2 * (two_of_three.net_alpha_us + bytes * two_of_three.exchange_per_byte(two_hosts)) +
               bytes * reduce));
  // 5 ranks on 2 cores: the core's 4 ranks wait for cores; charged as
  // exchanges (measured: docs/benchmarks.md, "Folds on two cores").
  const CostModel five = CostModel::defaults(5, 2);
  const CostModel fold = five.with_running_share(2.0 / 5);
  CHECK(five.fold_in_and_out(one_host, 5, 4, bytes) ==
        Approx(2 * (fold.alpha_us + bytes * fold.us_per_byte) + bytes * fold.reduce_us_per_byte));
  CHECK(five.fold_in_and_out(one_host, 4, 4, bytes) == 0);
  // So 3 ranks on 2 cores take Rabenseifner at 256 and 512 KiB (measured:
  // 192-236 and 389-420 us against the ring's 207-307 and 369-499) and the
  // ring from 2 MiB.
  const AlgoOverride none;
  for (std::size_t b : {std::size_t{256} << 10, std::size_t{512} << 10})
    CHECK(chosen(CollectiveKind::allreduce, b, plan_team(3), none, crowded) == "rabenseifner");
  CHECK(chosen(CollectiveKind::allreduce, 2 << 20, plan_team(3), none, crowded) == "ring");
}

TEST_CASE("cost model: the trees win where their few steps count", "[tuner]") {
  const AlgoOverride none;
  const CostModel m = CostModel::defaults(1, 2);
  // Broadcast on 8 ranks: 2 ceil(log2 n) = 6 steps against the chain's 8 for
  // a small buffer; for a large one the chain, whose root sends it once.
  CHECK(chosen(CollectiveKind::broadcast, 8, plan_team(8), none, m) == "tree");
  CHECK(chosen(CollectiveKind::broadcast, 64 << 20, plan_team(8), none, m) == "ring");
  // Allreduce of 64 KiB on 7 ranks: the double binary tree's 6 steps and 2B
  // per rank against the ring's 12 steps, and the fold of recursive doubling
  // and Rabenseifner (a whole buffer more) that 7 ranks need.
  CHECK(chosen(CollectiveKind::allreduce, 64 << 10, plan_team(7), none, m) == "double_binary_tree");
  // CHORUS_ALGO forces each of them.
  auto forced = AlgoOverride::parse(
      "allreduce:0-1K:rabenseifner,1K-inf:double_binary_tree;broadcast:0-inf:tree");
  CHECK(chosen(CollectiveKind::allreduce, 8, plan_team(8), forced, m) == "rabenseifner");
  CHECK(chosen(CollectiveKind::allreduce, 64 << 20, plan_team(8), forced, m) ==
        "double_binary_tree");
  CHECK(chosen(CollectiveKind::broadcast, 64 << 20, plan_team(8), forced, m) == "tree");
}

TEST_CASE("shared memory is an algorithm with a cost: chosen on one host, refused elsewhere",
          "[tuner]") {
  shm::Layout layout;
  layout.ranks = 4;
  const AlgoOverride none;
  const CostModel m = CostModel::defaults(4, 2);
  for (auto kind : {CollectiveKind::allreduce, CollectiveKind::broadcast, CollectiveKind::allgather,
                    CollectiveKind::reduce_scatter, CollectiveKind::barrier}) {
    INFO(collective_name(kind));
    for (std::size_t bytes : {std::size_t{8}, std::size_t{1} << 26}) {
      CHECK(chosen(kind, bytes, plan_team(4, &layout), none, m) == "shm");
      CHECK(chosen(kind, bytes, plan_team(4), none, m) != "shm");
    }
  }
  // A forced algorithm that refuses falls back, and says why.
  auto forced = AlgoOverride::parse("allreduce:0-inf:shm");
  auto s = select_algorithm(call_of(CollectiveKind::allreduce), 8, plan_team(4), forced, m, true);
  CHECK(s.spec->name == "recursive_doubling");
  CHECK_FALSE(s.forced);
  REQUIRE(s.refused_override != nullptr);
  CHECK(s.refused_override->name == "shm");
  CHECK_THAT(s.why(), Catch::Contains("CHORUS_ALGO chose shm, which refused") &&
                          Catch::Contains("no shared-memory domain"));
  // Every candidate is listed with its estimate or its refusal.
  CHECK(s.candidates.size() == algorithms_for(CollectiveKind::allreduce).size());
}

TEST_CASE("ring segments: about 16 per chunk within [256K, 1M]; the user's size wins", "[tuner]") {
  const CostModel quiet = CostModel::defaults(2, 2), busy = CostModel::defaults(8, 2);
  CHECK(ring_segment_bytes(8, 2, quiet, 0) == 256 << 10);
  CHECK(ring_segment_bytes(2 << 20, 2, quiet, 0) == 256 << 10);
  CHECK(ring_segment_bytes(16 << 20, 2, quiet, 0) == 512 << 10);
  CHECK(ring_segment_bytes(256 << 20, 2, quiet, 0) == 1 << 20);
  CHECK(ring_segment_bytes(2 << 20, 8, busy, 0) == 1 << 20);
  CHECK(ring_segment_bytes(2 << 20, 2, quiet, 4096) == 4096);
}

TEST_CASE("algorithm positions are part of the call contract and never move", "[tuner]") {
  // The call signature records 1 + the registry position (ranks compare it);
  // CHORUS_ALGO and chorus-info use the names. New algorithms go at the end.
  const std::pair<CollectiveKind, const char*> first[] = {
      {CollectiveKind::allreduce, "ring"},     {CollectiveKind::allreduce, "recursive_doubling"},
      {CollectiveKind::allreduce, "shm"},      {CollectiveKind::broadcast, "ring"},
      {CollectiveKind::broadcast, "shm"},      {CollectiveKind::allgather, "ring"},
      {CollectiveKind::allgather, "shm"},      {CollectiveKind::reduce_scatter, "ring"},
      {CollectiveKind::reduce_scatter, "shm"}, {CollectiveKind::barrier, "dissemination"},
      {CollectiveKind::barrier, "shm"},
  };
  for (std::size_t i = 0; i < std::size(first); ++i) {
    const AlgorithmSpec* spec = find_algorithm(first[i].first, first[i].second);
    INFO(collective_name(first[i].first) << " " << first[i].second);
    REQUIRE(spec != nullptr);
    CHECK(algorithm_id(*spec) == i + 1);
    CHECK(algorithm_by_id(static_cast<uint8_t>(i + 1)) == spec);
  }
  // Appended by issue 12, in this order, after everything above and the
  // v-collectives (shm_reduce_scatterv, the last before them).
  const auto id = [](CollectiveKind kind, const char* name) {
    const AlgorithmSpec* spec = find_algorithm(kind, name);
    return spec ? algorithm_id(*spec) : 0;
  };
  const auto rabenseifner = id(CollectiveKind::allreduce, "rabenseifner");
  const auto tree = id(CollectiveKind::broadcast, "tree");
  const auto double_tree = id(CollectiveKind::allreduce, "double_binary_tree");
  CHECK(rabenseifner > id(CollectiveKind::reduce_scatterv, "shm"));
  CHECK(tree == rabenseifner + 1);
  CHECK(double_tree == tree + 1);
  CHECK(algorithm_by_id(0) == nullptr);
  CHECK(find_algorithm(CollectiveKind::barrier, "ring") == nullptr);
}

TEST_CASE("registry: every algorithm described, named once per collective, runnable",
          "[tuner][registry]") {
  std::set<std::pair<CollectiveKind, std::string_view>> seen;
  for (const AlgorithmSpec* spec : algorithms()) {
    INFO(collective_name(spec->kind) << " " << spec->name);
    CHECK_FALSE(spec->name.empty());
    CHECK(spec->summary.size() > 20);
    CHECK(spec->refusal != nullptr);
    CHECK(spec->estimate_us != nullptr);
    CHECK(spec->run != nullptr);
    CHECK(seen.insert({spec->kind, spec->name}).second);
    CHECK(spec->kind != CollectiveKind::none);
    CHECK(spec->kind != CollectiveKind::send);
  }
  // Every collective has an algorithm that runs anywhere (no shared memory).
  for (int k = 1; k < kCollectiveKinds; ++k) {
    auto kind = static_cast<CollectiveKind>(k);
    if (kind == CollectiveKind::send) continue;
    INFO(collective_name(kind));
    CHECK_NOTHROW(select_algorithm(call_of(kind), 64, plan_team(3), AlgoOverride{}, CostModel{}));
  }
  // describe() names algorithms once the registry is up.
  CallSignature sig;
  sig.kind = static_cast<uint8_t>(CollectiveKind::allreduce);
  sig.algo = algorithm_id(*find_algorithm(CollectiveKind::allreduce, "recursive_doubling"));
  algorithms();
  CHECK_THAT(describe(sig), Catch::Contains("algorithm recursive_doubling"));
}
