// Failures on the shared-memory paths (coll_tests_shm only). On the latency
// path calls are checked through each rank's mail header (the signature next
// to the data), on the pipeline path and for other kinds of call through
// announcements on every health slice; both must end with a mismatch, and an
// absent rank with a timeout naming it. And the shared-memory barrier must
// hold every rank until the last one arrives.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "collectives/allreduce/shm.hpp"
#include "collectives/barrier/shm.hpp"
#include "collectives/broadcast/shm.hpp"
#include "base/core/error.hpp"
#include "tests/coll/harness.hpp"

using namespace chorus;
using namespace chorus::test;
TEST_CASE("shm latency path: a different count or another collective is a mismatch",
          "[failure][shm]") {
  for (int n : {2, 3}) {
    const int odd = n - 1;
    for (bool other_kind : {false, true}) {
      std::vector<std::vector<float>> bufs(n, std::vector<float>(9, 1.0f));
      RunOptions o;
      o.timeout = std::chrono::milliseconds(20000);  // it must fail long before this
      auto outcomes = run_ranks(n, o, [&](RankEnv& env) {
        const int r = env.rank();
        if (r == odd && other_kind) {
          auto ctx = env.context(make_sig(CollectiveKind::barrier, 7, 0, DataType::u8));
          shm_barrier(ctx);
          return;
        }
        const std::size_t count = r == odd ? 9 : 8;  // 32-36 bytes: the latency path
        auto ctx = env.context(make_sig(CollectiveKind::allreduce, 7, count, DataType::f32));
        shm_allreduce(ctx, bufs[r].data(), bufs[r].data(), count, DataType::f32, ReduceOp::sum);
      });
      INFO("ranks " << n << (other_kind ? ", barrier" : ", count") << "\n" << failures(outcomes));
      int mismatches = 0;
      for (int r = 0; r < n; ++r) {
        CHECK((outcomes[r].code == CHORUS_ERR_MISMATCH || outcomes[r].code == CHORUS_ERR_ABORTED));
        if (outcomes[r].code != CHORUS_ERR_MISMATCH) continue;
        ++mismatches;
        CHECK_THAT(outcomes[r].message,
                   Catch::Contains(fmt::format("rank {} called", odd)) ||
                       Catch::Contains(fmt::format("but rank {} called", odd)));
        CHECK_THAT(outcomes[r].message, Catch::Contains("allreduce #"));
      }
      CHECK(mismatches >= 1);
    }
  }
}

TEST_CASE("shm latency path: a rank that never calls makes the others time out naming it",
          "[failure][shm]") {
  const int n = 3, absent = 1;
  std::vector<std::vector<float>> bufs(n, std::vector<float>(4, 1.0f));
  const RunOptions o = absent_rank_run(absent, std::chrono::milliseconds(300));
  auto outcomes = run_ranks(n, o, [&](RankEnv& env) {
    const int r = env.rank();
    auto ctx = env.context(make_sig(CollectiveKind::allreduce, 11, 4, DataType::f32));
    shm_allreduce(ctx, bufs[r].data(), bufs[r].data(), 4, DataType::f32, ReduceOp::sum);
  });
  INFO(failures(outcomes));
  for (int r = 0; r < n; ++r) {
    if (r == absent) continue;
    CHECK(outcomes[r].code == CHORUS_ERR_TIMEOUT);
    CHECK_THAT(outcomes[r].message,
               Catch::Contains("allreduce #") &&
                   Catch::Contains(fmt::format("waiting for rank {} to post", absent)));
  }
}

TEST_CASE("shm pipeline path: a different count or another collective is a mismatch",
          "[failure][shm]") {
  // 1000 floats is past the 256-byte latency path of these domains: the
  // ranks meet in the pipeline's staging rounds, where a peer's announcement
  // is what tells them apart.
  for (int n : {2, 3}) {
    const int odd = n - 1;
    for (bool other_kind : {false, true}) {
      std::vector<std::vector<float>> bufs(n, std::vector<float>(1001, 1.0f));
      RunOptions o;
      o.timeout = std::chrono::milliseconds(20000);  // it must fail long before this
      auto outcomes = run_ranks(n, o, [&](RankEnv& env) {
        const int r = env.rank();
        if (r == odd && other_kind) {
          auto ctx = env.context(
              make_sig(CollectiveKind::broadcast, 5, 1000, DataType::f32, ReduceOp::sum, 0));
          shm_broadcast(ctx, bufs[r].data(), 1000, DataType::f32, 0);
          return;
        }
        const std::size_t count = r == odd ? 1001 : 1000;
        auto ctx = env.context(make_sig(CollectiveKind::allreduce, 5, count, DataType::f32));
        shm_allreduce(ctx, bufs[r].data(), bufs[r].data(), count, DataType::f32, ReduceOp::sum);
      });
      INFO("ranks " << n << (other_kind ? ", broadcast" : ", count") << "\n" << failures(outcomes));
      int mismatches = 0;
      for (int r = 0; r < n; ++r) {
        CHECK((outcomes[r].code == CHORUS_ERR_MISMATCH || outcomes[r].code == CHORUS_ERR_ABORTED));
        if (outcomes[r].code != CHORUS_ERR_MISMATCH) continue;
        ++mismatches;
        CHECK_THAT(outcomes[r].message,
                   Catch::Contains(fmt::format("rank {} called", odd)) ||
                       Catch::Contains(fmt::format("but rank {} called", odd)));
        CHECK_THAT(outcomes[r].message,
                   other_kind ? Catch::Contains("broadcast #") : Catch::Contains("count 1001"));
      }
      CHECK(mismatches >= 1);
    }
  }
}

TEST_CASE("shm pipeline path: a rank that never calls makes the others time out naming it",
          "[failure][shm]") {
  const int n = 3, absent = 2;
  std::vector<std::vector<float>> bufs(n, std::vector<float>(5000, 1.0f));
  const RunOptions o = absent_rank_run(absent, std::chrono::milliseconds(300));
  auto outcomes = run_ranks(n, o, [&](RankEnv& env) {
    const int r = env.rank();
    auto ctx = env.context(make_sig(CollectiveKind::allreduce, 12, 5000, DataType::f32));
    shm_allreduce(ctx, bufs[r].data(), bufs[r].data(), 5000, DataType::f32, ReduceOp::sum);
  });
  INFO(failures(outcomes));
  for (int r = 0; r < n; ++r) {
    if (r == absent) continue;
    CHECK(outcomes[r].code == CHORUS_ERR_TIMEOUT);
    CHECK_THAT(outcomes[r].message, Catch::Contains("allreduce #") &&
                                        Catch::Contains("timed out") &&
                                        Catch::Contains(fmt::format("of rank(s) {}", absent)));
  }
}

TEST_CASE("shm barrier: nobody leaves before everybody arrived", "[barrier][shm]") {
  for (int n : {2, 3, 4, 5, 8}) {
    constexpr int kRounds = 50;
    std::vector<std::atomic<int>> arrived(kRounds);
    std::vector<std::vector<int>> seen(n, std::vector<int>(kRounds, -1));
    auto outcomes = run_ranks(n, RunOptions{}, [&](RankEnv& env) {
      for (int k = 0; k < kRounds; ++k) {
        // Ranks arrive at different times: one of them is late every round.
        if (env.rank() == k % n) std::this_thread::yield();
        arrived[k].fetch_add(1);
        auto ctx = env.context(make_sig(CollectiveKind::barrier, k + 1, 0, DataType::u8));
        shm_barrier(ctx);
        seen[env.rank()][k] = arrived[k].load();
      }
    });
    INFO("ranks " << n);
    REQUIRE(failures(outcomes) == "");
    for (int r = 0; r < n; ++r)
      for (int k = 0; k < kRounds; ++k) CHECK(seen[r][k] == n);
  }
}
