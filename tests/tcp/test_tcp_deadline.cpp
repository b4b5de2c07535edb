// A deadline that passes inside a call's algorithm over TCP
// (CollectiveContext::wait, mark_part_done): the peers waited on are asked
// whether their part is done. Real ranks on threads, each playing its part
// of the call on its call board.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/core/error.hpp"
#include "collectives/context.hpp"
#include "tests/tcp/tcp_world.hpp"

using namespace chorus;
using namespace chorus::test;

namespace {

const uint32_t kDeadlineTag = (9u << Spared::kSpaceShift) | 1;

// A rank's context for call #3 (count `count`), whose deadline passes after
// `ms`; the rank is inside the call.
struct RankCall {
  Team team;
  ScratchPool scratch;
  CollectiveContext ctx;
  RankCall(TcpTransport& t, uint64_t count, int ms)
      : team(Team::whole(t, kDeadlineTag)),
        ctx(CollectiveContext::over(team, scratch, sig_of(3, count), Deadline::after_ms(ms),
                                    1 << 16, Spin{})) {
    ctx.whole_call = true;
    t.board().slot(kDeadlineTag).enter(ctx.sig);
  }
};

// Two ranks over TCP, both inside call #3, with their deadlines in ms.
struct TwoRanks {
  TcpStoreServer server{kToken};
  std::vector<std::unique_ptr<TcpTransport>> world;
  std::unique_ptr<RankCall> rank0, rank1;
  TwoRanks(const std::string& prefix, uint64_t count, int ms0, int ms1)
      : world(make_world(server, 2, prefix)),
        rank0(std::make_unique<RankCall>(*world[0], count, ms0)),
        rank1(std::make_unique<RankCall>(*world[1], count, ms1)) {}
  ~TwoRanks() {
    rank0.reset();
    rank1.reset();
    close_world(world);
  }
};

chorus_result_t code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const IoError& e) {
    return e.code();
  }
  return CHORUS_SUCCESS;
}

}  // namespace

TEST_CASE("deadline: a peer that has done its part is waited on past the deadline") {
  // Two ranks: rank 1's part of #3 is done (what it sends is on its way);
  // rank 0's deadline has passed before that message comes. It asks, hears
  // "done", and its deadline moves on: the message then completes the
  // wait, and rank 1 stays unsealed.
  TwoRanks two("d1/", 2, 0, 5000);
  RankCall &rank0 = *two.rank0, &rank1 = *two.rank1;
  mark_part_done(*two.world[1], kDeadlineTag, rank1.ctx.sig);
  const uint64_t sent = 0x1234567890abcdefULL;
  uint64_t got = 0;
  const RequestPtr arrival = rank0.ctx.recv(1, std::as_writable_bytes(std::span(&got, 1)));
  REQUIRE(rank0.ctx.deadline.expired());
  CHECK(rank0.ctx.extend_deadline(std::span(&arrival, 1)));
  CHECK(rank0.ctx.extensions == 1);
  CHECK_FALSE(rank0.ctx.deadline.expired());
  rank1.ctx.wait(rank1.ctx.send(0, std::as_bytes(std::span(&sent, 1))));
  CHECK_NOTHROW(rank0.ctx.wait(arrival));
  CHECK(got == sent);
  CHECK(two.world[1]->board().slot(kDeadlineTag).part_done(sig_of(4, 2)));  // not sealed
}

TEST_CASE("deadline: a peer whose part is not done is sealed and fails the call as a timeout") {
  // Rank 1 is inside #3 but has not done its part when rank 0's deadline
  // passes: rank 0 fails with the timeout, and rank 1, sealed, cannot
  // finish the call (it fails with the same code), whatever comes later.
  TwoRanks two("d2/", 2, 50, 5000);
  RankCall& rank0 = *two.rank0;
  uint64_t got = 0;
  CHECK(code_of([&] {
          rank0.ctx.wait(rank0.ctx.recv(1, std::as_writable_bytes(std::span(&got, 1))));
        }) == CHORUS_ERR_TIMEOUT);
  CHECK(rank0.ctx.extensions == 0);
  std::string message;
  try {
    mark_part_done(*two.world[1], kDeadlineTag, two.rank1->ctx.sig);
  } catch (const IoError& e) {
    CHECK(e.code() == CHORUS_ERR_TIMEOUT);
    message = e.what();
  }
  CHECK_THAT(message, Catch::Contains("deadline passed before this rank's part of allreduce #3"));
}

TEST_CASE("deadline: a root sealed before its release sends no release") {
  // Rank 1 awaits the root's release; its deadline passes first and it
  // seals the root, whose part is not done. The root then fails at its
  // commit point instead of releasing (no rank can finish), while a stage
  // of a composed algorithm is no commit point and releases.
  TwoRanks two("d3/", 0, 5000, 50);
  RankCall &root = *two.rank0, &rank1 = *two.rank1;
  RequestPtr release = rank1.ctx.await_confirmation(0);
  CHECK(code_of([&] { rank1.ctx.wait(release); }) == CHORUS_ERR_TIMEOUT);
  CHECK(code_of([&] { root.ctx.confirm_to_all(); }) == CHORUS_ERR_TIMEOUT);
  rank1.ctx.deadline = Deadline::after_ms(100);
  rank1.ctx.extensions = CollectiveContext::kMaxExtensions;  // no asking again
  CHECK(code_of([&] { rank1.ctx.wait(release); }) == CHORUS_ERR_TIMEOUT);
  root.ctx.whole_call = false;
  CHECK_NOTHROW(root.ctx.confirm_to_all());
  rank1.ctx.deadline = Deadline::after_ms(5000);
  CHECK_NOTHROW(rank1.ctx.wait(release));
}

TEST_CASE("deadline: a root whose release is under way is waited on past the deadline") {
  // The root committed (its part is done) before rank 1's deadline passed,
  // and releases only after it: rank 1's wait asks, hears "done", and
  // takes the release that follows. Without the ask it would time out.
  TwoRanks two("d4/", 0, 5000, 50);
  RankCall &root = *two.rank0, &rank1 = *two.rank1;
  root.ctx.commit();
  const Deadline rank1_deadline = rank1.ctx.deadline;
  auto late_release = std::async(std::launch::async, [&] {
    while (!rank1_deadline.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    root.ctx.confirm_to_all();
  });
  CHECK_NOTHROW(rank1.ctx.wait(rank1.ctx.await_confirmation(0)));
  CHECK_NOTHROW(late_release.get());
}

TEST_CASE("deadline: a rank that could not answer an ask reads it before it marks its part done") {
  // Rank 1 cannot answer for a while (as a process stopped whole): its
  // progress thread stands aside for a spinning waiter that does not poll.
  // Rank 0's deadline passes, it asks, and gives up on the answer after
  // 2 s. Rank 1 then comes to the end of its part with the ask unread: it
  // reads it first (a long gap since its last part done), is sealed by it,
  // and fails as rank 0 did instead of finishing the call.
  TwoRanks two("d5/", 2, 0, 60000);
  const std::vector<int> peer1{1};
  two.world[1]->spin_begin();
  CHECK_FALSE(two.world[0]->parts_done(kDeadlineTag, two.rank0->ctx.sig, peer1));
  CHECK(code_of([&] { mark_part_done(*two.world[1], kDeadlineTag, two.rank1->ctx.sig); }) ==
        CHORUS_ERR_TIMEOUT);
  two.world[1]->spin_end();
}

TEST_CASE("deadline: the gap since a rank last came to its gate is measured on its slot") {
  CallBoard::Slot slot;
  CHECK(slot.long_since_part_done(kDrainAfterGap));  // never before
  CHECK_FALSE(slot.long_since_part_done(kDrainAfterGap));
  std::this_thread::sleep_for(kDrainAfterGap + std::chrono::milliseconds(50));
  CHECK(slot.long_since_part_done(kDrainAfterGap));
  CHECK_FALSE(slot.long_since_part_done(kDrainAfterGap));
}

TEST_CASE("deadline: a rank that could not read takes a departed peer's verdict, not its send's") {
  // Rank 1 fails (as on its deadline) and leaves while rank 0 cannot read
  // (as a process stopped whole: its progress thread stands aside for a
  // waiter that does not poll), with part of a large frame from rank 0
  // unread, so that its socket resets. Rank 0's pending send then fails
  // first, but what rank 1 said before it went is read before the loss is
  // settled: rank 0 fails with rank 1's code and words, not as for a death.
  TcpStoreServer server{kToken};
  auto world = make_world(server, 2, "d7/");
  world[0]->spin_begin();
  std::vector<std::byte> large(64 << 20);
  const RequestPtr unread = world[0]->isend(1, kDeadlineTag, sig_of(3, large.size()), large);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // rank 1 parks it
  REQUIRE_FALSE(unread->done());
  world[1]->fail(CHORUS_ERR_TIMEOUT, "rank 1's deadline passed", Spared{});
  world[1]->close();
  world[1].reset();
  world[0]->spin_end();
  chorus_result_t code = CHORUS_SUCCESS;
  std::string message;
  const Deadline until = Deadline::after_ms(5000);
  while (code == CHORUS_SUCCESS && !until.expired()) {
    try {
      world[0]->check_failed();
    } catch (const IoError& e) {
      code = e.code();
      message = e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(code == CHORUS_ERR_TIMEOUT);
  CHECK_THAT(message, Catch::Contains("rank 1's deadline passed"));
  CHECK(unread->done());
  world[0]->close();
}
