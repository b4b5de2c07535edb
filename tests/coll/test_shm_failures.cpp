// Failures on the shared-memory latency path (coll_tests_shm only): calls are
// checked through each rank's mail header (the signature next to the data),
// and other kinds of call through announcements on every health slice; both
// must end with a mismatch, and an absent rank with a timeout naming it.
#include <catch2/catch.hpp>

#include <vector>

#include "collectives/allreduce/shm.hpp"
#include "collectives/barrier/shm.hpp"
#include "lib/core/error.hpp"
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
