// Recovering a small call's result from a survivor over TCP
// (collectives/verdict/recover.hpp, transports/tcp/tcp_recover.cpp): real
// ranks on threads, each playing its part of the call on its call board.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "tests/tcp/tcp_world.hpp"
#include "transports/call_board.hpp"

using namespace chorus;
using namespace chorus::test;

namespace {

const uint32_t kTag = (7u << Spared::kSpaceShift) | 1;
const std::vector<int> kRank1 = {1};

// The peers rank 0 asks: every other rank of the world.
std::vector<int> all_but_0(std::size_t size) {
  std::vector<int> peers;
  for (int r = 1; r < static_cast<int>(size); ++r) peers.push_back(r);
  return peers;
}

std::vector<std::byte> result_of(std::size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 31 + seed * 5) & 0xff);
  return v;
}

// Rank `t` finishes call `sig` as Communicator::execute does below the
// verdict round: the result kept, then its part marked done.
void finish_call(TcpTransport& t, const CallSignature& sig, std::span<const std::byte> result) {
  CallBoard::Slot& slot = t.board().slot(kTag);
  slot.enter(sig);
  slot.keep(sig, result);
  REQUIRE(slot.part_done(sig));
  slot.leave(sig, true);
}

// Ranks 0 and 2 inside call `sig`, their part not done; rank 1 finished it
// with `result` kept.
template <typename World>
void only_rank1_finished(World& world, const CallSignature& sig,
                         std::span<const std::byte> result) {
  finish_call(*world[1], sig, result);
  world[0]->board().slot(kTag).enter(sig);
  world[2]->board().slot(kTag).enter(sig);
}

}  // namespace

TEST_CASE("recover: a live peer that finished the call hands over its kept result") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "r1/");
  const CallSignature sig = sig_of(4, 64);
  const auto result = result_of(64, 4);
  only_rank1_finished(world, sig, result);
  std::vector<std::byte> got(64);
  CHECK(world[0]->recover_result(kTag, sig, all_but_0(world.size()), got) == 1);
  CHECK(got == result);
  close_world(world);
}

TEST_CASE("recover: when no live peer finished the call, each is sealed and none will") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "r2/");
  const CallSignature sig = sig_of(4, 16);
  for (int r = 0; r < 3; ++r) world[r]->board().slot(kTag).enter(sig);
  std::vector<std::byte> got(16);
  CHECK(world[0]->recover_result(kTag, sig, all_but_0(world.size()), got) == -1);
  // Both answered "not finished", so both are sealed: their part of this
  // call (kept result and all) is not marked done, and the call fails there.
  for (int r = 1; r < 3; ++r) {
    CallBoard::Slot& slot = world[r]->board().slot(kTag);
    slot.keep(sig, result_of(16, r));
    CHECK_FALSE(slot.part_done(sig));
  }
  close_world(world);
}

TEST_CASE("recover: a peer sealed by an asker whose deadline passed fails with its code") {
  // A deadline that passed on rank 0 after the peers got its part: rank 1
  // finished, rank 2 not yet. Rank 0 takes rank 1's result; rank 2, sealed,
  // fails the call with rank 0's code (then asks in turn, and takes it too).
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "r6/");
  const CallSignature sig = sig_of(4, 16);
  const auto result = result_of(16, 4);
  only_rank1_finished(world, sig, result);
  std::vector<std::byte> got(16);
  CHECK(world[0]->recover_result(kTag, sig, all_but_0(world.size()), got, CHORUS_ERR_TIMEOUT) == 1);
  CHECK(got == result);
  // The ask reached rank 2 too; the first "finished" ended the asking, so
  // its answer (and seal) may come a moment later.
  CallBoard::Slot& late = world[2]->board().slot(kTag);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (late.seal_code() != CHORUS_ERR_TIMEOUT && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  late.keep(sig, result_of(16, 2));
  CHECK_FALSE(late.part_done(sig));
  CHECK(late.seal_code() == CHORUS_ERR_TIMEOUT);
  // A peer failure's ask seals with its own code; the first sealer's stays.
  CHECK(world[1]->board().slot(kTag).seal_code() == CHORUS_ERR_TIMEOUT);
  world[0]->board().slot(kTag).leave(sig, false);
  std::vector<std::byte> again(16);
  const std::vector<int> rank2 = {2};
  CHECK(world[0]->recover_result(kTag, sig, rank2, again) == -1);
  CHECK(late.seal_code() == CHORUS_ERR_TIMEOUT);
  close_world(world);
}

TEST_CASE("round deadline: peers whose part is done say so and stay unsealed; others are sealed") {
  // Rank 0's deadline passed in #4's verdict round, its have sent. Rank 1's
  // part is done (its have is on its way): it says so and is not sealed, so
  // its later calls go on. Rank 2's is not: it is sealed with the code of a
  // deadline, and its part of #4 will not be done.
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "r7/");
  const CallSignature sig = sig_of(4, 1 << 20);
  for (int r = 0; r < 3; ++r) world[r]->board().slot(kTag).enter(sig);
  REQUIRE(world[1]->board().slot(kTag).part_done(sig));
  CHECK(world[0]->parts_done(kTag, sig, kRank1));
  CHECK(world[1]->board().slot(kTag).part_done(sig_of(5, 16)));  // not sealed
  const std::vector<int> both = {1, 2};
  CHECK_FALSE(world[0]->parts_done(kTag, sig, both));
  CallBoard::Slot& late = world[2]->board().slot(kTag);
  CHECK_FALSE(late.part_done(sig));
  CHECK(late.seal_code() == CHORUS_ERR_TIMEOUT);
  // A peer already past the call counts as done too.
  CHECK(world[0]->parts_done(kTag, sig, kRank1));
  close_world(world);
}

TEST_CASE("recover: a peer already keeping the next call's result still has the asked one") {
  // Rank 1 finished #4 and is inside #5 (kept, its part not marked yet) when
  // rank 0, which failed #4, asks: the answer is #4's result, and #5 fails
  // at rank 1 (sealed).
  TcpStoreServer server(kToken);
  auto world = make_world(server, 2, "r3/");
  const auto four = result_of(32, 4), five = result_of(32, 5);
  finish_call(*world[1], sig_of(4, 32), four);
  CallBoard::Slot& slot = world[1]->board().slot(kTag);
  slot.enter(sig_of(5, 32));
  slot.keep(sig_of(5, 32), five);
  std::vector<std::byte> got(32);
  CHECK(world[0]->recover_result(kTag, sig_of(4, 32), all_but_0(world.size()), got) == 1);
  CHECK(got == four);
  CHECK_FALSE(slot.part_done(sig_of(5, 32)));
  close_world(world);
}

TEST_CASE("recover: a barrier (no result bytes) finished by a peer counts as finished") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 2, "r4/");
  finish_call(*world[1], sig_of(9, 0), {});
  CHECK(world[0]->recover_result(kTag, sig_of(9, 0), all_but_0(world.size()), {}) == 1);
  close_world(world);
}

// The ask ends within its own 2 s bound either way; what this pins is that a
// death settled meanwhile ends it with no result, not a stale or invented one.
TEST_CASE("recover: a peer that dies instead of answering gives no result") {
  WithFakeRank1 pair("r5/");  // its listener is closed: probed, it is dead
  auto asking = std::async(std::launch::async, [&] {
    std::vector<std::byte> got(16);
    return pair.rank0->recover_result(kTag, sig_of(4, 16), kRank1, got);
  });
  FrameHeader ask{};
  read_exact(pair.fd.get(), writable_bytes_of(ask), Deadline::after(std::chrono::seconds(10)));
  CHECK(static_cast<FrameType>(ask.type) == FrameType::ask);
  CHECK(ask.sig.seq == 4);
  pair.fd.reset();  // dies without a goodbye or an answer
  REQUIRE(asking.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK(asking.get() == -1);
  pair.rank0.reset();
}

TEST_CASE("recover: an answer about another call is not taken for the asked one") {
  WithFakeRank1 pair("r6/", {}, "127.0.0.1:1");
  auto asking = std::async(std::launch::async, [&] {
    std::vector<std::byte> got(16);
    const int from = pair.rank0->recover_result(kTag, sig_of(4, 16), kRank1, got);
    return std::make_pair(from, got);
  });
  FrameHeader ask{};
  read_exact(pair.fd.get(), writable_bytes_of(ask), Deadline::after(std::chrono::seconds(10)));
  const auto answer = [&](uint64_t seq, std::span<const std::byte> result) {
    auto h = make_frame(FrameType::answer, kTag, result.size(), sig_of(seq, 16));
    h.flags = kAnswerFinished;
    write_all(pair.fd.get(), bytes_of(h), Deadline::after(std::chrono::seconds(10)));
    write_all(pair.fd.get(), result, Deadline::after(std::chrono::seconds(10)));
  };
  answer(3, result_of(16, 3));  // an earlier call: ignored
  answer(4, result_of(16, 4));
  REQUIRE(asking.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  const auto [from, got] = asking.get();
  CHECK(from == 1);
  CHECK(got == result_of(16, 4));
  pair.fd.reset();
  pair.rank0.reset();
}

TEST_CASE("recover: only the call's ranks are asked") {
  // Rank 2 finished a call with the same number in this space, but it is
  // not one of the call's ranks (a split communicator without it): not asked.
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "r7/");
  finish_call(*world[2], sig_of(4, 16), result_of(16, 4));
  std::vector<std::byte> got(16);
  CHECK(world[0]->recover_result(kTag, sig_of(4, 16), kRank1, got) == -1);
  CHECK(world[2]->board().slot(kTag).part_done(sig_of(5, 16)));  // never sealed
  close_world(world);
}

TEST_CASE("recover: a peer whose stream was dropped while alive is asked through its listener") {
  // The network drops the stream between ranks 0 and 1, both alive (the
  // probe settles it so); rank 1 had finished the call, rank 0 had not. Rank
  // 0 cannot ask over the stream, so it asks rank 1's listener.
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "r8/");
  const CallSignature sig = sig_of(4, 48);
  const auto result = result_of(48, 8);
  only_rank1_finished(world, sig, result);
  world[0]->lose_connection(1, "the network dropped it (test)");
  const auto settled = Deadline::after(std::chrono::seconds(10));
  while (!first_error([&] { world[0]->check_call(kTag, sig); }) && !settled.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto why = first_error([&] { world[0]->check_call(kTag, sig); });
  REQUIRE(why);
  CHECK_THAT(why->what(), Catch::Contains("with both alive"));
  std::vector<std::byte> got(48);
  CHECK(world[0]->recover_result(kTag, sig, all_but_0(world.size()), got) == 1);
  CHECK(got == result);
  close_world(world);
}

TEST_CASE("recover: a peer that finished the call and left has handed its result over") {
  // Rank 1 finished the call and leaves while ranks 0 and 2 are still in it
  // (its close gives up on their goodbyes after 0.2 s). Rank 0 fails the
  // call later (a third rank did not answer its deadline's ask) and takes
  // the result rank 1 sent as it left; rank 2, asked nothing, is not sealed.
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "r9/", [](TcpOptions& o) {
    if (o.rank == 1) o.close_timeout_s = 0.2;
  });
  const CallSignature sig = sig_of(4, 40);
  const auto result = result_of(40, 9);
  only_rank1_finished(world, sig, result);
  world[1]->close();
  world[1].reset();
  world[0]->drain_input();
  std::vector<std::byte> got(40);
  CHECK(world[0]->recover_result(kTag, sig, all_but_0(world.size()), got) == 1);
  CHECK(got == result);
  CHECK(world[2]->board().slot(kTag).part_done(sig));
  std::vector<std::byte> other(40);  // another call's result is not taken for it
  CHECK(world[0]->recover_result(kTag, sig_of(5, 40), kRank1, other) == -1);
  std::thread closing0([&] { world[0]->close(); });
  world[2]->close();
  closing0.join();
}
