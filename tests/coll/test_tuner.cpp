// Algorithm selection: the CHORUS_ALGO grammar and the cost model.
#include <catch2/catch.hpp>

#include "collectives/tuner/selection.hpp"
#include "base/core/error.hpp"

using namespace chorus;

TEST_CASE("CHORUS_ALGO: rules cover [lo, hi) per collective", "[tuner]") {
  auto o =
      AlgoOverride::parse("allreduce:0-64K:recursive_doubling,64K-inf:ring;broadcast:0-inf:ring");
  CHECK(o.lookup(CollectiveKind::allreduce, 0) == Algorithm::recursive_doubling);
  CHECK(o.lookup(CollectiveKind::allreduce, 65535) == Algorithm::recursive_doubling);
  CHECK(o.lookup(CollectiveKind::allreduce, 65536) == Algorithm::ring);
  CHECK(o.lookup(CollectiveKind::allreduce, std::size_t(1) << 40) == Algorithm::ring);
  CHECK(o.lookup(CollectiveKind::broadcast, 10) == Algorithm::ring);
  CHECK(o.lookup(CollectiveKind::allgather, 10).has_value() == false);
  CHECK(AlgoOverride::parse("").empty());
  auto gap = AlgoOverride::parse("allreduce:1K-2K:ring");
  CHECK(gap.lookup(CollectiveKind::allreduce, 512).has_value() == false);
}

TEST_CASE("CHORUS_ALGO: malformed text is refused with the reason", "[tuner]") {
  for (const char* bad :
       {"allreduce", "allreduce:0-64K", "allreduce:64K-0:ring", "allreduce:0-1K:tree",
        "gather:0-inf:ring", "allreduce:x-1K:ring", "broadcast:0-inf:recursive_doubling"}) {
    INFO(bad);
    CHECK_THROWS_AS(AlgoOverride::parse(bad), UsageError);
  }
}

TEST_CASE("cost model: latency-bound sizes take recursive doubling, large ones the ring",
          "[tuner]") {
  const AlgoOverride none;
  for (int ranks : {2, 3, 4, 5, 8}) {
    for (int on_host : {ranks, 1}) {
      CostModel m = CostModel::defaults(on_host, 2);
      INFO("ranks " << ranks << ", " << on_host << " on this host");
      CHECK(choose_algorithm(CollectiveKind::allreduce, 8, ranks, none, m).algo ==
            Algorithm::recursive_doubling);
      CHECK(choose_algorithm(CollectiveKind::allreduce, 64 << 20, ranks, none, m).algo ==
            Algorithm::ring);
    }
  }
  // Oversubscription makes steps dearer, so the crossover moves up.
  auto crossover = [&](int ranks, CostModel m) {
    std::size_t b = 8;
    while (choose_algorithm(CollectiveKind::allreduce, b, ranks, none, m).algo != Algorithm::ring)
      b *= 2;
    return b;
  };
  CHECK(crossover(8, CostModel::defaults(8, 2)) > crossover(8, CostModel::defaults(2, 2)));
  // The override wins over the model.
  auto forced = AlgoOverride::parse("allreduce:0-inf:ring");
  CHECK(choose_algorithm(CollectiveKind::allreduce, 8, 4, forced, CostModel{}).algo ==
        Algorithm::ring);
  CHECK(choose_algorithm(CollectiveKind::allreduce, 8, 1, none, CostModel{}).algo ==
        Algorithm::ring);
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
  // The call signature records 1 + the position (ranks compare it), and
  // CHORUS_ALGO and chorus-info use the names.
  CHECK(algorithm_index(CollectiveKind::allreduce, Algorithm::ring) == 0);
  CHECK(algorithm_index(CollectiveKind::allreduce, Algorithm::recursive_doubling) == 1);
  CHECK(algorithm_index(CollectiveKind::allreduce, Algorithm::shm) == 2);
  CHECK(algorithm_index(CollectiveKind::broadcast, Algorithm::shm) == 1);
  CHECK(algorithm_index(CollectiveKind::barrier, Algorithm::dissemination) == 0);
  CHECK_THROWS(algorithm_index(CollectiveKind::barrier, Algorithm::ring));
  CHECK(algorithm_name(Algorithm::recursive_doubling) == "recursive_doubling");
  CHECK(AlgoOverride::parse("barrier:0-inf:shm").lookup(CollectiveKind::barrier, 0) ==
        Algorithm::shm);
}
