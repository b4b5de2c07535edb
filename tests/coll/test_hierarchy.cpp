// Ranks on simulated hosts: the host groups (patterns/hierarchy.hpp), the
// hierarchical and host-ordered algorithms over them in every placement, and
// their selection. Hosts are letters, one per rank (RunOptions::hosts); the
// host teams run over the point-to-point transport.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "base/core/error.hpp"
#include "collectives/call.hpp"
#include "collectives/common/side_stages.hpp"
#include "collectives/patterns/hierarchy.hpp"
#include "collectives/registry.hpp"
#include "collectives/team_hierarchy.hpp"
#include "tests/coll/check.hpp"
#include "tests/coll/harness.hpp"

using namespace chorus;
using namespace chorus::test;

namespace {

std::vector<std::string> names_of(std::string_view letters) {
  std::vector<std::string> out;
  for (char c : letters) out.emplace_back(1, c);
  return out;
}

// Placements of {1,2,3,4,5,7,8} ranks on 2 and 3 hosts: grouped, round-robin
// and unequal.
const std::vector<std::string_view> kPlacements = {
    "ab",    "aab",     "aba",     "aabb",     "abab",     "aabbb",    "ababa",
    "abcab", "aaabbcc", "abcabca", "aaaabbbb", "abababab", "aabbbccc", "abcabcab"};

}  // namespace

TEST_CASE("host groups: hosts in order of their lowest rank, lanes, host order",
          "[hierarchy][patterns]") {
  auto g = patterns::group_by_host(names_of("aabbb"));
  CHECK(g.hosts == std::vector<std::vector<int>>{{0, 1}, {2, 3, 4}});
  CHECK(g.lanes() == 2);
  CHECK(g.lane(0) == std::vector<int>{0, 2});
  CHECK(g.lane(1) == std::vector<int>{1, 3});
  CHECK(g.local_index == std::vector<int>{0, 1, 0, 1, 2});
  CHECK(g.grouped());

  g = patterns::group_by_host(names_of("baba"));  // names do not order hosts; ranks do
  CHECK(g.hosts == std::vector<std::vector<int>>{{0, 2}, {1, 3}});
  CHECK(g.host_order() == std::vector<int>{0, 2, 1, 3});
  CHECK_FALSE(g.grouped());
  CHECK(g.host_of == std::vector<int>{0, 1, 0, 1});

  // Placement for the cost model: the ring's edges that leave a host, and
  // the most members on one host.
  CHECK(placement_of({0, 0, 1, 1}).ring_crossings == 1);
  CHECK(placement_of({0, 1, 0, 1}).ring_crossings == 2);
  CHECK(placement_of({0, 1, 0, 1}).host_load == 2);
  CHECK(placement_of({0, 1, 2}).ring_crossings == 1);
  CHECK(placement_of({0, 1, 2}).host_load == 1);
  CHECK_FALSE(placement_of({3, 3, 3}).spans_hosts());
  // ... the ring's edges between hosts in all, and how many doubling
  // distances (1, 2, 4, ...) pair ranks of one host only.
  CHECK(placement_of({0, 0, 1, 1}).ring_edges_across == 2);
  CHECK(placement_of({0, 1, 0, 1}).ring_edges_across == 4);
  CHECK(placement_of({0, 0, 0, 0, 1, 1, 1, 1}).local_rounds == 2);
  CHECK(placement_of({0, 0, 1, 1}).local_rounds == 1);
  CHECK(placement_of({0, 1, 0, 1}).local_rounds == 0);
  CHECK(placement_of({0, 0, 0, 1, 1, 1}).local_rounds == 0);  // 2 ^ 1 = 3 leaves host 0
  CHECK(placement_of({0, 0, 0, 0, 1}).local_rounds == 2);     // 4 has no partner below 5

  // Any placement: host order is a permutation with each host contiguous, and
  // lane j holds the rank of local index j of every host.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40), hosts = 1 + static_cast<int>(rng() % 6);
    std::vector<std::string> names;
    for (int r = 0; r < n; ++r) names.push_back(std::to_string(rng() % hosts));
    g = patterns::group_by_host(names);
    std::vector<int> order = g.host_order();
    INFO("trial " << trial << " n " << n);
    REQUIRE(static_cast<int>(order.size()) == n);
    std::set<int> seen(order.begin(), order.end());
    REQUIRE(static_cast<int>(seen.size()) == n);
    for (int i = 1; i < n; ++i) {
      const int a = order[i - 1], b = order[i];
      if (names[a] == names[b])
        REQUIRE(a < b);
      else
        REQUIRE(std::find(order.begin() + i, order.end(), a) == order.end());
    }
    std::size_t fewest = n;
    for (const auto& h : g.hosts) fewest = std::min(fewest, h.size());
    REQUIRE(g.lanes() == static_cast<int>(fewest));
    for (int j = 0; j < g.lanes(); ++j) {
      const auto lane = g.lane(j);
      REQUIRE(static_cast<int>(lane.size()) == g.host_count());
      for (std::size_t h = 0; h < lane.size(); ++h) {
        REQUIRE(g.host_of[lane[h]] == static_cast<int>(h));
        REQUIRE(g.local_index[lane[h]] == j);
      }
    }
  }
}

TEST_CASE("stage segments: one per MiB up to 32, one without a host of two ranks",
          "[hierarchy][patterns]") {
  CHECK(patterns::stage_segments(0, 2) == 1);
  CHECK(patterns::stage_segments((1 << 20) - 1, 4) == 1);
  CHECK(patterns::stage_segments(2 << 20, 2) == 2);
  CHECK(patterns::stage_segments(4000012, 2) == 3);  // 1000003 floats
  CHECK(patterns::stage_segments(20 << 20, 2) == 20);
  CHECK(patterns::stage_segments(64 << 20, 2) == 32);
  CHECK(patterns::stage_segments(std::size_t{1} << 40, 8) == 32);
  CHECK(patterns::stage_segments(64 << 20, 1) == 1);
}

TEST_CASE("side stages: segments run in order beside the caller; a failure reaches wait",
          "[hierarchy][side_stages]") {
  const Deadline kWait = Deadline::after(std::chrono::seconds(30));
  for (bool threaded : {true, false}) {
    INFO("threaded " << threaded);
    std::vector<int> order;
    std::atomic<bool> other_thread{false};
    const auto caller = std::this_thread::get_id();
    {
      SideStages side(
          [&](int s) {
            order.push_back(s);
            if (std::this_thread::get_id() != caller) other_thread = true;
          },
          threaded);
      for (int s = 0; s < 5; ++s) side.release(s);
      side.wait(4, kWait);
      CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
    }
    CHECK(other_thread == threaded);

    // Segment 1 throws: wait(1) and later waits rethrow it, segment 2 never
    // runs, and the destructor returns.
    std::atomic<int> ran{0};
    SideStages failing(
        [&](int s) {
          ++ran;
          if (s == 1) throw std::runtime_error("lane failed");
        },
        threaded);
    failing.release(0);
    failing.wait(0, kWait);
    if (threaded) {
      failing.release(1);
      failing.release(2);
      CHECK_THROWS_WITH(failing.wait(1, kWait), "lane failed");
      CHECK_THROWS_WITH(failing.wait(2, kWait), "lane failed");
    } else {
      CHECK_THROWS_WITH(failing.release(1), "lane failed");
    }
    CHECK(ran == 2);
  }
  // A segment still running kGrace after the deadline: wait gives up with a
  // timeout instead of waiting for it.
  std::atomic<bool> unstick{false};
  {
    SideStages stuck(
        [&](int) {
          while (!unstick) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        },
        true);
    stuck.release(0);
    chorus_result_t code = CHORUS_SUCCESS;
    try {
      stuck.wait(0, Deadline::after(std::chrono::milliseconds(0)));
    } catch (const IoError& e) {
      code = e.code();
    }
    CHECK(code == CHORUS_ERR_TIMEOUT);
    unstick = true;
  }

  // The caller leaves (it threw) while segments are released but not run:
  // the destructor lets the one under way (if it started) finish and runs
  // no more.
  std::atomic<int> ran{0};
  std::atomic<bool> go{false};
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    go = true;
  });
  {
    SideStages side(
        [&](int) {
          ++ran;
          while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        },
        true);
    for (int s = 0; s < 4; ++s) side.release(s);
  }
  later.join();
  CHECK(ran <= 1);
}

TEST_CASE("hierarchical allreduce: segments, the lanes' stage on a thread of its own",
          "[allreduce][hierarchy][side_stages]") {
  // 4 MiB of floats: 4 segments, each lane's allreduce beside the host's
  // stages; unequal hosts leave a rank in no lane.
  for (std::string_view hosts : {"aabb", "aabbb", "abcabc"}) {
    for (auto [op, in_place] : {std::pair{ReduceOp::sum, false}, std::pair{ReduceOp::avg, true}}) {
      Case c{static_cast<int>(hosts.size()),
             std::size_t{1} << 20,
             DataType::f32,
             op,
             in_place,
             kDefaultSegment,
             0};
      c.algorithm = "hierarchical";
      c.hosts = hosts;
      INFO(describe_case(c));
      REQUIRE(check_allreduce(c) == "");
    }
  }
}

TEST_CASE("hierarchical and host-ordered allreduce: placements, dtypes, ops, in and out of place",
          "[allreduce][hierarchy]") {
  for (std::string_view algo : {"hierarchical", "ring_by_host"}) {
    for (std::string_view hosts : kPlacements) {
      for (std::size_t count : {0, 1, 7, 131}) {
        for (DataType dt : kDtypes) {
          for (ReduceOp op : kOps) {
            for (bool in_place : {false, true}) {
              Case c{static_cast<int>(hosts.size()), count, dt, op, in_place, 64, 0};
              c.algorithm = algo;
              c.hosts = hosts;
              INFO(describe_case(c));
              REQUIRE(check_allreduce(c) == "");
            }
          }
        }
      }
    }
  }
}

TEST_CASE("hierarchical and host-ordered allreduce: count 1000003",
          "[allreduce][hierarchy][large]") {
  for (std::string_view algo : {"hierarchical", "ring_by_host"}) {
    for (std::string_view hosts : {"aab", "abab", "aabbb", "abcabca", "aaaabbbb"}) {
      for (auto [dt, op] :
           {std::pair{DataType::f32, ReduceOp::sum}, std::pair{DataType::i32, ReduceOp::max},
            std::pair{DataType::f64, ReduceOp::avg}}) {
        Case c{static_cast<int>(hosts.size()),
               kBig,
               dt,
               op,
               hosts.size() % 2 == 0,
               kDefaultSegment,
               0};
        c.algorithm = algo;
        c.hosts = hosts;
        INFO(describe_case(c));
        REQUIRE(check_allreduce(c) == "");
      }
    }
  }
}

TEST_CASE("hierarchical broadcast: placements, every root, element sizes",
          "[broadcast][hierarchy]") {
  for (std::string_view hosts : kPlacements) {
    const int n = static_cast<int>(hosts.size());
    for (int root = 0; root < n; ++root) {
      for (std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1031}}) {
        for (DataType dt : {DataType::u8, DataType::f16, DataType::f32, DataType::u64}) {
          Case c{n, count, dt, ReduceOp::sum, false, 64, root};
          c.algorithm = "hierarchical";
          c.hosts = hosts;
          INFO(describe_case(c));
          REQUIRE(check_broadcast(c) == "");
        }
      }
    }
  }
}

TEST_CASE("hierarchical allgather: placements, counts, element sizes, in and out of place",
          "[allgather][hierarchy]") {
  for (std::string_view hosts : kPlacements) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1031}}) {
      for (DataType dt : {DataType::u8, DataType::f16, DataType::f32, DataType::u64}) {
        for (bool in_place : {false, true}) {
          Case c{static_cast<int>(hosts.size()), count, dt, ReduceOp::sum, in_place, 64, 0};
          c.algorithm = "hierarchical";
          c.hosts = hosts;
          INFO(describe_case(c));
          REQUIRE(check_allgather(c) == "");
        }
      }
    }
  }
}

TEST_CASE("hierarchical broadcast and allgather: count 1000003", "[hierarchy][large]") {
  for (std::string_view hosts : {"aab", "abab", "abcabca", "aaaabbbb"}) {
    const int n = static_cast<int>(hosts.size());
    Case c{n, kBig, DataType::f32, ReduceOp::sum, false, kDefaultSegment, n - 1};
    c.algorithm = "hierarchical";
    c.hosts = hosts;
    INFO(describe_case(c));
    REQUIRE(check_broadcast(c) == "");
    c.count = kBig / 8;
    c.in_place = true;
    REQUIRE(check_allgather(c) == "");
  }
}

TEST_CASE("hierarchical algorithms refuse a team on one host; selection is the same on every rank",
          "[hierarchy][tuner]") {
  CollectiveCall call;
  call.kind = CollectiveKind::allreduce;
  for (auto [kind, name] : {std::pair{CollectiveKind::allreduce, "hierarchical"},
                            std::pair{CollectiveKind::allreduce, "ring_by_host"},
                            std::pair{CollectiveKind::broadcast, "hierarchical"},
                            std::pair{CollectiveKind::allgather, "hierarchical"}}) {
    const AlgorithmSpec* spec = find_algorithm(kind, name);
    REQUIRE(spec);
    Team one_host;
    one_host.members = {0, 1, 2};
    call.kind = kind;
    CHECK(spec->refusal(one_host, call) != nullptr);
  }
  call.kind = CollectiveKind::allreduce;
  for (std::string_view hosts : {"aabbb", "abab", "abcabca"}) {
    const int n = static_cast<int>(hosts.size());
    // Per rank, per size: the algorithm chosen and every estimate.
    std::vector<std::vector<std::string>> chosen(static_cast<std::size_t>(n));
    RunOptions o;
    o.hosts = std::string(hosts);
    const std::vector<std::size_t> sizes = {8, 4096, 1 << 20, 64 << 20};
    auto outcomes = run_ranks(n, o, [&](RankEnv& env) {
      env.model.set_network(30, 1);  // 1 Gbit/s links: the network dominates
      for (std::size_t bytes : sizes) {
        call.count = bytes / 4;
        Selection s = select_algorithm(call, bytes, env.team, env.user, env.model, true);
        chosen[static_cast<std::size_t>(env.rank())].push_back(std::string(s.spec->name) + ": " +
                                                               s.why());
      }
    });
    REQUIRE(failures(outcomes) == "");
    for (int r = 1; r < n; ++r) {
      INFO("hosts " << hosts << " rank " << r);
      CHECK(chosen[static_cast<std::size_t>(r)] == chosen[0]);
    }
    // Large calls across slow links: the hierarchical allreduce, whose
    // traffic across hosts is shared by the ranks of a host.
    CHECK(chosen[0].back().rfind("hierarchical: ", 0) == 0);
  }
}
