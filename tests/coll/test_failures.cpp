// Barrier, several calls in a row on one set of transports, and failures that
// must end with the right error instead of a hang: a rank with a different
// count (mismatch) and a rank that never calls (timeout).
#include <catch2/catch.hpp>

#include <atomic>
#include <numeric>
#include <vector>

#include "collectives/allgather/ring.hpp"
#include "collectives/allreduce/ring.hpp"
#include "collectives/barrier/dissemination.hpp"
#include "collectives/broadcast/ring.hpp"
#include "collectives/reduce_scatter/ring.hpp"
#include "lib/core/error.hpp"
#include "tests/coll/harness.hpp"

using namespace chorus;
using namespace chorus::test;

TEST_CASE("dissemination barrier: nobody leaves before everybody arrived", "[barrier]") {
  for (int n : {1, 2, 3, 4, 5, 8}) {
    constexpr int kRounds = 20;
    std::vector<std::atomic<int>> arrived(kRounds);
    std::vector<std::vector<int>> seen(n, std::vector<int>(kRounds, -1));
    auto outcomes = run_ranks(n, RunOptions{}, [&](RankEnv& env) {
      for (int k = 0; k < kRounds; ++k) {
        arrived[k].fetch_add(1);
        auto ctx = env.context(make_sig(CollectiveKind::barrier, k + 1, 0, DataType::u8));
        dissemination_barrier(ctx);
        seen[env.rank()][k] = arrived[k].load();
      }
    });
    INFO("ranks " << n);
    REQUIRE(failures(outcomes) == "");
    for (int r = 0; r < n; ++r)
      for (int k = 0; k < kRounds; ++k) CHECK(seen[r][k] == n);
  }
}

TEST_CASE("a sequence of different collectives on the same transports", "[sequence]") {
  for (int n : {1, 3, 4, 8}) {
    constexpr std::size_t kCount = 1000;
    std::vector<std::vector<int32_t>> ar(n), ag(n), bc(n), rs(n);
    auto outcomes = run_ranks(n, RunOptions{}, [&](RankEnv& env) {
      const int r = env.rank();
      uint64_t seq = 0;
      for (int iter = 0; iter < 3; ++iter) {
        ar[r].assign(kCount, r + iter);
        auto c1 = env.context(make_sig(CollectiveKind::allreduce, ++seq, kCount, DataType::i32));
        ring_allreduce(c1, ar[r].data(), ar[r].data(), kCount, DataType::i32, ReduceOp::sum);
        bc[r].assign(kCount, r == iter % n ? 77 + iter : -1);
        auto c2 = env.context(make_sig(CollectiveKind::broadcast, ++seq, kCount, DataType::i32,
                                       ReduceOp::sum, iter % n));
        ring_broadcast(c2, bc[r].data(), kCount, DataType::i32, iter % n);
        std::vector<int32_t> mine(kCount, r * 10 + iter);
        ag[r].assign(kCount * n, -1);
        auto c3 = env.context(make_sig(CollectiveKind::allgather, ++seq, kCount, DataType::i32));
        ring_allgather(c3, mine.data(), ag[r].data(), kCount, DataType::i32);
        std::vector<int32_t> contrib(kCount * n, 1);
        rs[r].assign(kCount, 0);
        auto c4 = env.context(
            make_sig(CollectiveKind::reduce_scatter, ++seq, kCount, DataType::i32, ReduceOp::max));
        ring_reduce_scatter(c4, contrib.data(), rs[r].data(), kCount, DataType::i32, ReduceOp::max);
        auto c5 = env.context(make_sig(CollectiveKind::barrier, ++seq, 0, DataType::u8));
        dissemination_barrier(c5);
        // Results are checked after the last iteration only.
      }
    });
    INFO("ranks " << n);
    REQUIRE(failures(outcomes) == "");
    const int sum = n * (n - 1) / 2 + 2 * n;
    for (int r = 0; r < n; ++r) {
      CHECK(ar[r] == std::vector<int32_t>(kCount, sum));
      CHECK(bc[r] == std::vector<int32_t>(kCount, 79));
      for (int q = 0; q < n; ++q) CHECK(ag[r][q * kCount + 5] == q * 10 + 2);
      CHECK(rs[r] == std::vector<int32_t>(kCount, 1));
    }
  }
}

TEST_CASE("a rank with a different count fails with a mismatch naming both ranks", "[failure]") {
  for (int n : {2, 3, 5}) {
    const int odd = n - 1;
    std::vector<std::vector<float>> bufs(n, std::vector<float>(101, 1.0f));
    RunOptions o;
    o.timeout = std::chrono::milliseconds(20000);  // it must fail long before this
    auto outcomes = run_ranks(n, o, [&](RankEnv& env) {
      const int r = env.rank();
      const std::size_t count = r == odd ? 101 : 100;
      auto ctx = env.context(make_sig(CollectiveKind::allreduce, 4, count, DataType::f32));
      ring_allreduce(ctx, bufs[r].data(), bufs[r].data(), count, DataType::f32, ReduceOp::sum);
    });
    INFO("ranks " << n << "\n" << failures(outcomes));
    int mismatches = 0;
    for (int r = 0; r < n; ++r) {
      const auto& out = outcomes[r];
      CHECK((out.code == CHORUS_ERR_MISMATCH || out.code == CHORUS_ERR_ABORTED));
      if (out.code != CHORUS_ERR_MISMATCH) continue;
      ++mismatches;
      // "rank A called allreduce #4 (count X, ...) but rank B called allreduce #4 (count Y, ...)"
      CHECK_THAT(out.message, Catch::Contains(fmt::format("rank {} called allreduce #4", odd)));
      CHECK_THAT(out.message, Catch::Contains("count 101, float32, sum"));
      CHECK_THAT(out.message, Catch::Contains("count 100, float32, sum"));
    }
    CHECK(mismatches >= 1);
  }
}

TEST_CASE("a rank that never calls makes the others time out naming the peer", "[failure]") {
  for (int n : {2, 4}) {
    const int absent = n - 1;
    std::vector<std::vector<float>> bufs(n, std::vector<float>(64, 1.0f));
    const RunOptions o = absent_rank_run(absent, std::chrono::milliseconds(300));
    auto outcomes = run_ranks(n, o, [&](RankEnv& env) {
      const int r = env.rank();
      auto ctx = env.context(make_sig(CollectiveKind::allreduce, 9, 64, DataType::f32));
      ring_allreduce(ctx, bufs[r].data(), bufs[r].data(), 64, DataType::f32, ReduceOp::sum);
    });
    INFO("ranks " << n << "\n" << failures(outcomes));
    for (int r = 0; r < n; ++r) {
      if (r == absent) continue;
      CHECK(outcomes[r].code == CHORUS_ERR_TIMEOUT);
      CHECK_THAT(outcomes[r].message,
                 Catch::Contains("allreduce #9") && Catch::Contains("timed out"));
    }
    // The absent rank's right neighbour waits on it directly.
    CHECK_THAT(outcomes[(absent + 1) % n].message,
               Catch::Contains(fmt::format("receive from rank {}", absent)));
  }
}

TEST_CASE("bad arguments are usage errors", "[usage]") {
  auto outcomes = run_ranks(2, RunOptions{}, [&](RankEnv& env) {
    std::vector<int32_t> buf(16);
    auto ctx = env.context(make_sig(CollectiveKind::allreduce, 1, 8, DataType::i32));
    ring_allreduce(ctx, buf.data(), buf.data() + 4, 8, DataType::i32, ReduceOp::sum);
  });
  for (const auto& o : outcomes) CHECK(o.code == CHORUS_ERR_INVALID_ARGUMENT);
  outcomes = run_ranks(2, RunOptions{}, [&](RankEnv& env) {
    std::vector<int32_t> buf(4);
    auto ctx =
        env.context(make_sig(CollectiveKind::broadcast, 1, 4, DataType::i32, ReduceOp::sum, 2));
    ring_broadcast(ctx, buf.data(), 4, DataType::i32, 2);
  });
  for (const auto& o : outcomes) CHECK(o.code == CHORUS_ERR_INVALID_ARGUMENT);
  outcomes = run_ranks(2, RunOptions{}, [&](RankEnv& env) {
    std::vector<int32_t> buf(8);
    auto ctx = env.context(make_sig(CollectiveKind::allgather, 1, 4, DataType::i32));
    ring_allgather(ctx, buf.data() + 1, buf.data(), 4, DataType::i32);
  });
  for (const auto& o : outcomes) CHECK(o.code == CHORUS_ERR_INVALID_ARGUMENT);
}
