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

#include "base/bootstrap/tcp_store.hpp"
#include "base/core/error.hpp"
#include "collectives/allreduce/shm.hpp"
#include "collectives/barrier/shm.hpp"
#include "collectives/broadcast/shm.hpp"
#include "collectives/shm/domain.hpp"
#include "tests/coll/harness.hpp"
#include "tests/common/transport_test.hpp"
#include "transports/transport.hpp"

using namespace chorus;
using namespace chorus::test;
namespace {

// Ranks 0..n-2 all-reduce `count` floats; rank n-1 calls with count + 1, or
// a barrier (latency path) / a broadcast (pipeline). Every rank must fail, at
// least one with a mismatch naming rank n-1.
void expect_mismatch(std::size_t count, CollectiveKind other) {
  for (int n : {2, 3}) {
    const int odd = n - 1;
    for (bool other_kind : {false, true}) {
      std::vector<std::vector<float>> bufs(n, std::vector<float>(count + 1, 1.0f));
      RunOptions o;
      o.timeout = std::chrono::milliseconds(20000);  // it must fail long before this
      auto outcomes = run_ranks(n, o, [&](RankEnv& env) {
        const int r = env.rank();
        if (r == odd && other_kind) {
          auto ctx =
              env.context(make_sig(other, 7, other == CollectiveKind::barrier ? 0 : count,
                                   other == CollectiveKind::barrier ? DataType::u8 : DataType::f32,
                                   ReduceOp::sum, other == CollectiveKind::broadcast ? 0 : -1));
          if (other == CollectiveKind::barrier)
            shm_barrier(ctx);
          else
            shm_broadcast(ctx, bufs[r].data(), count, DataType::f32, 0);
          return;
        }
        const std::size_t mine = r == odd ? count + 1 : count;
        auto ctx = env.context(make_sig(CollectiveKind::allreduce, 7, mine, DataType::f32));
        shm_allreduce(ctx, bufs[r].data(), bufs[r].data(), mine, DataType::f32, ReduceOp::sum);
      });
      INFO("ranks " << n << ", count " << count << (other_kind ? ", other kind" : ", other count")
                    << "\n"
                    << failures(outcomes));
      int mismatches = 0;
      for (int r = 0; r < n; ++r) {
        CHECK((outcomes[r].code == CHORUS_ERR_MISMATCH || outcomes[r].code == CHORUS_ERR_ABORTED));
        if (outcomes[r].code != CHORUS_ERR_MISMATCH) continue;
        ++mismatches;
        CHECK_THAT(outcomes[r].message,
                   Catch::Contains(fmt::format("rank {} called", odd)) ||
                       Catch::Contains(fmt::format("but rank {} called", odd)));
        CHECK_THAT(outcomes[r].message, other_kind
                                            ? Catch::Contains(std::string(collective_name(other)))
                                            : Catch::Contains(fmt::format("count {}", count + 1)));
      }
      CHECK(mismatches >= 1);
    }
  }
}

// Rank `absent` never calls an allreduce of `count` floats: the others time
// out naming it.
void expect_timeout(std::size_t count, const std::string& naming) {
  const int n = 3, absent = 1;
  std::vector<std::vector<float>> bufs(n, std::vector<float>(count, 1.0f));
  const RunOptions o = absent_rank_run(absent, std::chrono::milliseconds(300));
  auto outcomes = run_ranks(n, o, [&](RankEnv& env) {
    const int r = env.rank();
    auto ctx = env.context(make_sig(CollectiveKind::allreduce, 11, count, DataType::f32));
    shm_allreduce(ctx, bufs[r].data(), bufs[r].data(), count, DataType::f32, ReduceOp::sum);
  });
  INFO("count " << count << "\n" << failures(outcomes));
  for (int r = 0; r < n; ++r) {
    if (r == absent) continue;
    CHECK(outcomes[r].code == CHORUS_ERR_TIMEOUT);
    CHECK_THAT(outcomes[r].message, Catch::Contains("allreduce #") &&
                                        Catch::Contains("timed out") && Catch::Contains(naming));
  }
}

}  // namespace

TEST_CASE("shm latency path: a different count or another collective is a mismatch",
          "[failure][shm]") {
  expect_mismatch(8, CollectiveKind::barrier);  // 32-36 bytes: the latency path
}

TEST_CASE("shm pipeline path: a different count or another collective is a mismatch",
          "[failure][shm]") {
  // 1000 floats is past the 256-byte latency path of these domains: the
  // ranks meet in the pipeline's staging rounds, where a peer's announcement
  // is what tells them apart.
  expect_mismatch(1000, CollectiveKind::broadcast);
}

TEST_CASE("shm: a rank that never calls makes the others time out naming it", "[failure][shm]") {
  expect_timeout(4, "waiting for rank 1 to post");    // latency path
  expect_timeout(5000, "staged input of rank(s) 1");  // pipeline
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

namespace {

// Two ranks' domains over one segment, joined on threads (no control channel).
std::vector<std::unique_ptr<shm::Domain>> join_pair(
    TcpStoreServer& server, std::vector<std::unique_ptr<TcpStoreClient>>& stores,
    const std::string& key_prefix) {
  std::vector<std::unique_ptr<shm::Domain>> domains(2);
  stores.resize(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      stores[r] = std::make_unique<TcpStoreClient>(server.address(), "coll-test",
                                                   Deadline::after(std::chrono::seconds(30)));
      shm::Domain::Options o;
      o.rank = r;
      o.layout.ranks = 2;
      o.name_prefix = shm::segment_name_prefix("coll-test");
      o.key_prefix = key_prefix;
      domains[r] = shm::Domain::join(*stores[r], o);
    });
  for (auto& t : threads) t.join();
  return domains;
}

// A control channel that learns rank 1 left at the moment it is asked, just
// after rank 1 posted its part (as a peer that posts and then destroys its
// communicator between a wait's look at the counters and its question).
class LeftAfterPosting final : public test::NoDataTransport {
 public:
  explicit LeftAfterPosting(shm::Domain& rank1) : NoDataTransport(0, 2), rank1_(rank1) {}
  void check_peer(int peer, uint32_t, const CallSignature&) override {
    if (peer != 1) return;
    if (posts_) rank1_.publish(shm::Counter::arrived, 1);
    throw IoError(CHORUS_ERR_PEER_FAILURE, "rank 1 left (test)");
  }
  bool posts_ = true;

 private:
  shm::Domain& rank1_;
};

}  // namespace

// A wait looks at the counters, then asks the control channel about the
// peers; a peer that posted its part and left in between has not failed the
// wait (its part is there), while one that left without posting has.
TEST_CASE("shm: a peer that posted its part and left does not fail the wait", "[failure][shm]") {
  TcpStoreServer server("coll-test");
  std::vector<std::unique_ptr<TcpStoreClient>> stores;
  auto domains = join_pair(server, stores, "shm-left/");
  REQUIRE((domains[0] && domains[1]));
  LeftAfterPosting control(*domains[1]);
  shm::WaitSpec spec;
  spec.deadline = Deadline::after(std::chrono::seconds(20));
  spec.control = &control;
  domains[0]->publish(shm::Counter::arrived, 1);
  CHECK_NOTHROW(domains[0]->wait_all(shm::Counter::arrived, 1, spec));
  control.posts_ = false;  // the next barrier: rank 1 leaves without posting
  domains[0]->publish(shm::Counter::arrived, 2);
  try {
    domains[0]->wait_all(shm::Counter::arrived, 2, spec);
    FAIL("rank 1 left without its part, and the wait did not say so");
  } catch (const IoError& e) {
    CHECK_THAT(e.what(), Catch::Contains("rank 1 left"));
  }
}

// Rank 0 posted its part and its deadline passed waiting for rank 1's. Had
// it only failed, rank 1 could post next and finish the call from rank 0's
// part (the two would disagree). The timed-out wait seals rank 1's word
// first: rank 1's post fails with the timeout, and so does the call there.
TEST_CASE("shm: a deadline that passes seals the awaited rank's part", "[failure][shm]") {
  TcpStoreServer server("coll-test");
  std::vector<std::unique_ptr<TcpStoreClient>> stores;
  auto domains = join_pair(server, stores, "shm-seal/");
  REQUIRE((domains[0] && domains[1]));
  shm::WaitSpec spec;
  spec.deadline = Deadline::after(std::chrono::milliseconds(50));
  const CallSignature sig = make_sig(CollectiveKind::allreduce, 3, 4, DataType::f32);
  const uint64_t digest = signature_digest(sig);
  // The latency path's mail.
  domains[0]->post_mail(0, digest);
  CHECK_THROWS_WITH(domains[0]->wait_mail(0, sig, digest, spec),
                    Catch::Contains("waiting for rank 1 to post"));
  try {
    domains[1]->post_mail(0, digest);
    FAIL("rank 1 posted its part after rank 0's deadline sealed it");
  } catch (const IoError& e) {
    CHECK(e.code() == CHORUS_ERR_TIMEOUT);
    CHECK_THAT(e.what(), Catch::Contains("deadline passed before rank 1 posted"));
  }
  // A counter (a barrier's arrival): the same.
  domains[0]->publish(shm::Counter::arrived, 1);
  spec.deadline = Deadline::after(std::chrono::milliseconds(50));
  CHECK_THROWS_WITH(domains[0]->wait_all(shm::Counter::arrived, 1, spec),
                    Catch::Contains("arrival of rank(s) 1"));
  try {
    domains[1]->publish(shm::Counter::arrived, 1);
    FAIL("rank 1 arrived after rank 0's deadline sealed its arrival");
  } catch (const IoError& e) {
    CHECK(e.code() == CHORUS_ERR_TIMEOUT);
  }
  // A rank that posted in time is not sealed: the wait goes on to success.
  domains[1]->publish(shm::Counter::staged, 1);
  domains[0]->publish(shm::Counter::staged, 1);
  spec.deadline = Deadline::after(std::chrono::milliseconds(50));
  CHECK_NOTHROW(domains[0]->wait_all(shm::Counter::staged, 1, spec));
}
