// Barrier, several calls in a row on one set of transports, and failures that
// must end with the right error instead of a hang: a rank with a different
// count (mismatch) and a rank that never calls (timeout).
#include <catch2/catch.hpp>

#include <atomic>
#include <numeric>
#include <vector>

#include "base/core/error.hpp"
#include "collectives/allgather/ring.hpp"
#include "collectives/allreduce/ring.hpp"
#include "collectives/barrier/dissemination.hpp"
#include "collectives/broadcast/ring.hpp"
#include "collectives/reduce_scatter/ring.hpp"
#include "tests/coll/harness.hpp"
#include "tests/coll/values.hpp"

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
  // Every call's values depend on the rank, the iteration and the element,
  // and every iteration's results are kept and checked in full, so a call
  // that reads another call's data, or a block taken from the wrong rank,
  // shows.
  constexpr int kIters = 3;
  constexpr std::size_t kCount = 1000;
  auto value = [](int r, int iter, std::size_t i) {
    return static_cast<int32_t>(1 + r * 7919 + iter * 104729 + static_cast<int32_t>(i) * 31);
  };
  // For max: which rank holds the largest value changes from element to element.
  auto scrambled = [](int r, int iter, std::size_t i) {
    return static_cast<int32_t>(mix(r, i + static_cast<std::size_t>(iter) * 1000003) >> 33);
  };
  for (int n : {1, 3, 4, 8}) {
    // [rank][iteration] -> buffer
    using PerIter = std::vector<std::vector<int32_t>>;
    std::vector<PerIter> ar(n, PerIter(kIters)), ag(n, PerIter(kIters)), bc(n, PerIter(kIters)),
        rs(n, PerIter(kIters));
    auto outcomes = run_ranks(n, RunOptions{}, [&](RankEnv& env) {
      const int r = env.rank();
      uint64_t seq = 0;
      for (int iter = 0; iter < kIters; ++iter) {
        auto& a = ar[r][iter];
        a.resize(kCount);
        for (std::size_t i = 0; i < kCount; ++i) a[i] = value(r, iter, i);
        auto c1 = env.context(make_sig(CollectiveKind::allreduce, ++seq, kCount, DataType::i32));
        ring_allreduce(c1, a.data(), a.data(), kCount, DataType::i32, ReduceOp::sum);
        const int root = iter % n;
        auto& b = bc[r][iter];
        b.assign(kCount, -1);
        if (r == root)
          for (std::size_t i = 0; i < kCount; ++i) b[i] = value(r, iter, i) * 3;
        auto c2 = env.context(
            make_sig(CollectiveKind::broadcast, ++seq, kCount, DataType::i32, ReduceOp::sum, root));
        ring_broadcast(c2, b.data(), kCount, DataType::i32, root);
        std::vector<int32_t> mine(kCount);
        for (std::size_t i = 0; i < kCount; ++i) mine[i] = value(r, iter, i) * 5;
        auto& g = ag[r][iter];
        g.assign(kCount * n, -1);
        auto c3 = env.context(make_sig(CollectiveKind::allgather, ++seq, kCount, DataType::i32));
        ring_allgather(c3, mine.data(), g.data(), kCount, DataType::i32);
        std::vector<int32_t> contrib(kCount * n);
        for (std::size_t i = 0; i < contrib.size(); ++i) contrib[i] = scrambled(r, iter, i);
        auto& x = rs[r][iter];
        x.assign(kCount, -1);
        auto c4 = env.context(
            make_sig(CollectiveKind::reduce_scatter, ++seq, kCount, DataType::i32, ReduceOp::max));
        ring_reduce_scatter(c4, contrib.data(), x.data(), kCount, DataType::i32, ReduceOp::max);
        auto c5 = env.context(make_sig(CollectiveKind::barrier, ++seq, 0, DataType::u8));
        dissemination_barrier(c5);
      }
    });
    INFO("ranks " << n);
    REQUIRE(failures(outcomes) == "");
    for (int iter = 0; iter < kIters; ++iter) {
      INFO("iteration " << iter);
      std::vector<int32_t> sum(kCount), bcast(kCount), gathered(kCount * n);
      for (std::size_t i = 0; i < kCount; ++i) {
        for (int q = 0; q < n; ++q) sum[i] += value(q, iter, i);
        bcast[i] = value(iter % n, iter, i) * 3;
      }
      for (int q = 0; q < n; ++q)
        for (std::size_t i = 0; i < kCount; ++i) gathered[q * kCount + i] = value(q, iter, i) * 5;
      for (int r = 0; r < n; ++r) {
        INFO("rank " << r);
        CHECK(ar[r][iter] == sum);
        CHECK(bc[r][iter] == bcast);
        CHECK(ag[r][iter] == gathered);
        std::vector<int32_t> block(kCount, INT32_MIN);
        for (std::size_t i = 0; i < kCount; ++i)
          for (int q = 0; q < n; ++q)
            block[i] = std::max(block[i], scrambled(q, iter, r * kCount + i));
        CHECK(rs[r][iter] == block);
      }
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
