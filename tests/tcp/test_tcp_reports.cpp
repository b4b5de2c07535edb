// What the TCP transport reports when a call cannot finish, between thread
// ranks of one process over real loopback sockets: the stuck-rank report
// (where each peer it waited on is, following a chain of waits), the call
// board that vouches for the calls a rank finished, failure notices on the
// wire, and a connection another channel lost. Matching, mismatches, aborts
// and parked frames: test_tcp_transport.cpp.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "base/core/error.hpp"
#include "collectives/verdict/agree.hpp"
#include "tests/common/transport_test.hpp"
#include "tests/tcp/tcp_world.hpp"
#include "transports/tcp/tcp_transport.hpp"
#include "transports/tcp/wire.hpp"

using namespace chorus;
using namespace chorus::tcp;
using namespace chorus::test;

namespace {

// The error of a wait on `recvs` that times out after `ms` (checked to be a
// timeout): the stuck-rank report and the call.
std::string timeout_message(Transport& t, const std::vector<RequestPtr>& recvs,
                            const CallSignature& call, int ms) {
  try {
    wait_all(t, recvs, Deadline::after(std::chrono::milliseconds(ms)), Spin{}, call);
  } catch (const IoError& e) {
    CHECK(e.code() == CHORUS_ERR_TIMEOUT);
    return e.what();
  }
  FAIL("the wait did not time out");
  return "";
}

}  // namespace

TEST_CASE("tcp: a timed-out wait says where each peer it waited on is (stuck-rank report)") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "stuck/");
  const uint32_t tag = (5u << Spared::kSpaceShift) | 1;
  // Rank 1 finished a barrier #40 and is still in broadcast #41; rank 2
  // finished #40 and is in no call; rank 0 waits on both in allreduce #42.
  CallSignature barrier = sig_of(40, 0), broadcast = sig_of(41, 4), mine = sig_of(42, 16);
  barrier.kind = static_cast<uint8_t>(CollectiveKind::barrier);
  broadcast.kind = static_cast<uint8_t>(CollectiveKind::broadcast);
  for (int r : {1, 2}) {
    world[r]->board().slot(tag).enter(barrier);
    world[r]->board().slot(tag).leave(barrier, true);
  }
  world[1]->board().slot(tag).enter(broadcast);
  std::vector<std::byte> a(16 * 4), b(16 * 4);
  std::vector<RequestPtr> recvs{world[0]->irecv(1, tag, mine, a), world[0]->irecv(2, tag, mine, b)};
  const std::string message = timeout_message(*world[0], recvs, mine, 600);
  INFO(message);
  // The peers' whereabouts come first, then the call that timed out.
  CHECK(message.rfind("rank 1 is still in broadcast #41", 0) == 0);
  CHECK_THAT(message,
             Catch::Contains("rank 2 is in no call: the last it finished is barrier #40") &&
                 Catch::Contains("rank 0: allreduce #42") &&
                 Catch::Contains("timed out waiting on receive from rank 1, receive "
                                 "from rank 2"));
  // A peer that never answered is said to be so, not guessed at.
  CallBoard board;
  CHECK(board.describe_peer(4, tag, mine) == "rank 4 did not report where it is");
  // Every other state, as a report would file it.
  CallSignature later = sig_of(43, 16);
  board.heard(4, tag, CallProgress{mine, barrier, 2});
  CHECK_THAT(board.describe_peer(4, tag, mine),
             Catch::StartsWith("rank 4 is in this call too (#42), waiting on rank 2, as of"));
  board.heard(4, tag, CallProgress{later, mine, -1});
  CHECK_THAT(board.describe_peer(4, tag, mine),
             Catch::StartsWith("rank 4 is already in allreduce #43"));
  board.heard(4, tag, CallProgress{CallSignature{}, mine, -1});
  CHECK_THAT(board.describe_peer(4, tag, mine),
             Catch::StartsWith("rank 4 has finished allreduce #42"));
  board.heard(4, tag, CallProgress{});
  CHECK_THAT(board.describe_peer(4, tag, mine),
             Catch::StartsWith("rank 4 is in no call: it has not started one"));
  // A slot read while another thread writes it is never torn: every read is
  // one of the states written (current and finished from the same write).
  CallBoard::Slot& slot = board.slot(tag);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (uint64_t n = 1; !stop.load(); ++n) {
      slot.enter(sig_of(n, n));
      slot.leave(sig_of(n, n), true);
    }
  });
  bool consistent = true;
  for (int i = 0; i < 20000; ++i) {
    const CallProgress p = slot.read();
    if (p.current.seq != 0 &&
        (p.current.count != p.current.seq || p.finished.seq + 1 != p.current.seq))
      consistent = false;
    if (p.current.seq == 0 && p.finished.count != p.finished.seq) consistent = false;
  }
  stop = true;
  writer.join();
  CHECK(consistent);
  CHECK(board.spared().entries.size() == 1);
  CHECK(board.spared().entries[0].finished == slot.read().finished.seq);
  // Reports are per tag space.
  CHECK(board.describe_peer(4, (6u << Spared::kSpaceShift) | 1, mine) ==
        "rank 4 did not report where it is");
  close_world(world);
}

namespace {

// A board whose rank finished #3 (with its verdict round) and is in #4.
CallBoard::Slot& finished_3_in_4(CallBoard& board) {
  CallBoard::Slot& slot = board.slot((3u << Spared::kSpaceShift) | 1);
  slot.enter(sig_of(3, 16));
  CHECK(slot.part_done(sig_of(3, 16)));
  slot.leave(sig_of(3, 16), true);
  slot.enter(sig_of(4, 16));
  return slot;
}

}  // namespace

TEST_CASE("call board: a rank vouches for the calls whose part it did, and does no more") {
  CallBoard board;
  CallBoard::Slot& slot = finished_3_in_4(board);
  CHECK(slot.part_done(sig_of(4, 16)));  // #4's part done: in its verdict round
  CHECK(board.vouch().entries.at(0).finished == 4);
  CHECK(board.spared().entries.at(0).finished == 3);  // finished is still #3
  slot.leave(sig_of(4, 16), true);
  // Sealed: #5's part cannot be done now, and the vouch stays what it was.
  slot.enter(sig_of(5, 16));
  CHECK_FALSE(slot.part_done(sig_of(5, 16)));
  CHECK(board.vouch().entries.at(0).finished == 4);
}

TEST_CASE("call board: a rank that vouched before its part was done does not do it") {
  CallBoard board;
  CallBoard::Slot& slot = finished_3_in_4(board);
  CHECK(board.vouch().entries.at(0).finished == 3);  // cut off in the middle of #4
  CHECK_FALSE(slot.part_done(sig_of(4, 16)));        // so it takes no part in #4's round
  CHECK(board.vouch().entries.at(0).finished == 3);
}

TEST_CASE("tcp: a stuck-rank report follows a chain of waits to the rank that is absent") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 4, "chain/");
  const uint32_t tag = (5u << Spared::kSpaceShift) | 1;
  // As in a hierarchical call: rank 1 waits in allreduce #42 on rank 2 (its
  // way to another host), rank 2 on rank 3, and rank 3 finished #41 and is
  // in no call. Rank 0, waiting on rank 1 alone, must name rank 3.
  CallSignature before = sig_of(41, 16), mine = sig_of(42, 16);
  for (int r : {1, 2, 3}) {
    world[r]->board().slot(tag).enter(before);
    world[r]->board().slot(tag).leave(before, true);
  }
  for (int r : {1, 2}) {
    world[r]->board().slot(tag).enter(mine);
    world[r]->board().waiting(tag, mine, r + 1);
  }
  std::vector<std::byte> a(16 * 4);
  std::string message = timeout_message(*world[0], {world[0]->irecv(1, tag, mine, a)}, mine, 600);
  INFO(message);
  CHECK(message.rfind("rank 3 is in no call: the last it finished is allreduce #41", 0) == 0);
  CHECK_THAT(message, Catch::Contains("(reached through rank 1 -> rank 2 -> rank 3, each waiting "
                                      "on the next)") &&
                          Catch::Contains("timed out waiting on receive from rank 1"));
  // A chain that comes back to the waiting rank describes the peer alone.
  world[2]->board().waiting(tag, mine, 0);
  message = timeout_message(*world[0], {world[0]->irecv(1, tag, mine, a)}, mine, 400);
  INFO(message);
  CHECK(message.rfind("rank 1 is in this call too (#42), waiting on rank 2", 0) == 0);
  close_world(world);
}

TEST_CASE("failure notices: the spared calls and the message survive the wire") {
  const Spared spared{{{1, 41}, {7, 0}, {2047, ~uint64_t(0) >> 1}}};
  std::string message;
  Spared back;
  REQUIRE(decode_notice(encode_notice("rank 3: broke", spared, 4096), message, back));
  CHECK(message == "rank 3: broke");
  REQUIRE(back.entries.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(back.entries[i].space == spared.entries[i].space);
    CHECK(back.entries[i].finished == spared.entries[i].finished);
  }
  CHECK(back.covers((1u << 20) | 1, sig_of(41, 1)));
  CHECK_FALSE(back.covers((1u << 20) | 1, sig_of(42, 1)));
  CHECK_FALSE(back.covers((3u << 20) | 1, sig_of(1, 1)));
  // The message is cut to fit; a list that cannot fit is dropped (nothing spared).
  CHECK(encode_notice(std::string(5000, 'x'), spared, 100).size() == 100);
  REQUIRE(decode_notice(encode_notice("m", spared, 20), message, back));
  CHECK(back.entries.empty());
  // Truncated or short payloads are refused.
  const std::string whole = encode_notice("m", spared, 4096);
  CHECK_FALSE(decode_notice(whole.substr(0, 10), message, back));
  CHECK_FALSE(decode_notice("ab", message, back));
}

// A data transport (UCX) under this control channel lost its connection to a
// peer that is alive (RoutedTransport hands it here: lose_connection). Both
// ranks must settle it as a connection the network dropped, with both alive:
// they fail the call in progress together and spare what both finished,
// instead of taking each other for dead. A third rank hears of it.
TEST_CASE("tcp: a connection another channel lost is settled with both alive") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "lose/");
  const uint32_t tag = (3u << Spared::kSpaceShift) | 1;
  for (int r = 0; r < 2; ++r) finished_3_in_4(world[r]->board());
  std::vector<std::byte> got0(16), got1(16);
  auto at0 = world[0]->irecv(1, tag, sig_of(4, 16), got0);  // #4: neither part is done
  auto at1 = world[1]->irecv(0, tag, sig_of(4, 16), got1);
  world[0]->lose_connection(1, "the other channel to rank 1 failed (test)");
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    std::string message;
    CHECK(error_code(*world[r], r == 0 ? at0 : at1, &message) == CHORUS_ERR_PEER_FAILURE);
    CHECK_THAT(message, Catch::Contains("between rank") && Catch::Contains("with both alive"));
    CHECK_NOTHROW(world[r]->check_call(tag, sig_of(3, 16)));  // finished by both: spared
    CHECK_THROWS_AS(world[r]->check_call(tag, sig_of(4, 16)), IoError);
  }
  auto heard = first_error([&] { world[2]->check_call(tag, sig_of(4, 16)); });
  REQUIRE(heard);
  CHECK(heard->code() == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(heard->what(), Catch::Contains("with both alive"));
  close_world(world);
}
