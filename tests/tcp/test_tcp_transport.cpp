// The TCP transport between thread ranks of one process, through a real
// store and real loopback sockets; and against hand-made bad peers.
#include <poll.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <functional>

#include <cstring>
#include <future>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "base/core/error.hpp"
#include "base/core/scratch.hpp"
#include "collectives/team.hpp"
#include "collectives/verdict/agree.hpp"
#include "tests/common/transport_test.hpp"
#include "tests/tcp/tcp_world.hpp"
#include "transports/tcp/socket.hpp"
#include "transports/tcp/tcp_transport.hpp"
#include "transports/tcp/wire.hpp"

using namespace chorus;
using namespace chorus::tcp;
using namespace chorus::test;

namespace {

// Returns once a message from `peer` with `tag` has arrived at `t` without a
// receive to take it (bounded: fails the test after 10 s).
void wait_for_arrival(TcpTransport& t, int peer, uint32_t tag) {
  auto deadline = Deadline::after(std::chrono::seconds(10));
  while (!t.has_unmatched_arrival(peer, tag)) {
    REQUIRE_FALSE(deadline.expired());
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

std::vector<std::byte> pattern(std::size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed * 7) & 0xff);
  return v;
}

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

TEST_CASE("tcp: messages of every size arrive intact, posted before or after arrival") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 2, "sizes/");
  auto& a = *world[0];
  auto& b = *world[1];
  for (std::size_t n :
       {std::size_t(0), std::size_t(1), std::size_t(8), std::size_t(4095), std::size_t(4096),
        std::size_t(65536), std::size_t(65536 + 56), std::size_t(100003), std::size_t(9) << 20}) {
    for (bool receive_first : {true, false}) {
      INFO("message of " << n << " bytes, receive posted " << (receive_first ? "first" : "later"));
      auto data = pattern(n, static_cast<int>(n % 97));
      std::vector<std::byte> got(n);
      RequestPtr recv, send;
      auto sig = sig_of(n, n);
      if (receive_first) recv = b.irecv(0, 1, sig, got);
      send = a.isend(1, 1, sig, data);
      if (!receive_first) {
        wait_for_arrival(b, 0, 1);  // kept as unexpected, or parked in the socket
        recv = b.irecv(0, 1, sig, got);
      }
      wait(b, recv);
      wait(a, send);
      REQUIRE(got == data);
    }
  }
  close_world(world);
}

TEST_CASE("tcp: messages with one tag match in order; tags are independent") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "order/");
  std::vector<std::vector<std::byte>> sent, got(20, std::vector<std::byte>(1000));
  std::vector<RequestPtr> sends, recvs;
  for (int i = 0; i < 20; ++i) sent.push_back(pattern(1000, i));
  // Tag 2 receives are posted first but the tag 1 messages must not land there.
  for (int i = 10; i < 20; ++i) recvs.push_back(world[2]->irecv(1, 2, sig_of(i, 0), got[i]));
  for (int i = 0; i < 20; ++i)
    sends.push_back(world[1]->isend(2, i < 10 ? 1 : 2, sig_of(i, 0), sent[i]));
  for (int i = 0; i < 10; ++i) recvs.push_back(world[2]->irecv(1, 1, sig_of(i, 0), got[i]));
  for (auto& r : recvs) wait(*world[2], r);
  for (auto& s : sends) wait(*world[1], s);
  for (int i = 0; i < 20; ++i) REQUIRE(got[i] == sent[i]);
  close_world(world);
}

TEST_CASE("tcp: a mismatched call fails the receive naming both ranks and both calls") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 2, "mismatch/");
  std::vector<std::byte> data(64), got(64);
  auto send = world[0]->isend(1, 1, sig_of(3, 16), data);
  auto recv = world[1]->irecv(0, 1, sig_of(3, 17), got);
  std::string message;
  CHECK(error_code(*world[1], recv, &message) == CHORUS_ERR_MISMATCH);
  CHECK_THAT(message, Catch::Contains("rank 0 called allreduce #3 (count 16") &&
                          Catch::Contains("rank 1 called allreduce #3 (count 17"));
  std::vector<std::byte> small(8);
  auto send2 = world[0]->isend(1, 1, sig_of(4, 1), data);
  auto recv2 = world[1]->irecv(0, 1, sig_of(4, 1), small);
  CHECK(error_code(*world[1], recv2, &message) == CHORUS_ERR_MISMATCH);
  CHECK_THAT(message, Catch::Contains("64 bytes") && Catch::Contains("8 bytes"));
  // The senders' part was done: the mismatch is the receiver's to report.
  CHECK(error_code(*world[0], send) == CHORUS_SUCCESS);
  CHECK(error_code(*world[0], send2) == CHORUS_SUCCESS);
  close_world(world);
}

TEST_CASE("tcp: abort fails the peers' pending receives with the reason") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "abort/");
  std::vector<std::byte> got(10);
  auto recv = world[2]->irecv(1, 1, sig_of(1, 10), got);
  world[0]->abort("test reason");
  std::string message;
  CHECK(error_code(*world[2], recv, &message) == CHORUS_ERR_ABORTED);
  CHECK_THAT(message, Catch::Contains("rank 0 aborted: test reason"));
  auto recv1 = world[1]->irecv(0, 1, sig_of(1, 10), got);
  CHECK(error_code(*world[1], recv1) == CHORUS_ERR_ABORTED);
  // Later requests fail at once.
  auto later = world[1]->isend(2, 1, sig_of(2, 10), got);
  CHECK(error_code(*world[1], later) == CHORUS_ERR_ABORTED);
  close_world(world);
}

TEST_CASE("tcp: with isolated peer failures, a failing peer fails only what involves it") {
  TcpStoreServer server(kToken);
  auto world =
      make_world(server, 3, "isolate/", [](TcpOptions& o) { o.isolate_peer_failures = true; });
  std::vector<std::byte> got(10), from0(10);
  auto recv = world[2]->irecv(1, 1, sig_of(1, 10), got);
  auto other = world[2]->irecv(0, 1, sig_of(1, 10), from0);
  world[1]->abort("worker died");
  std::string message;
  CHECK(error_code(*world[2], recv, &message) == CHORUS_ERR_ABORTED);
  CHECK_THAT(message, Catch::Contains("rank 1 aborted: worker died"));
  // Later requests with rank 1 fail at once; ranks 0 and 2 go on.
  auto later = world[2]->isend(1, 1, sig_of(2, 10), got);
  CHECK(later->done());
  CHECK(error_code(*world[2], later) == CHORUS_ERR_ABORTED);
  auto data = pattern(10, 3);
  auto send0 = world[0]->isend(2, 1, sig_of(1, 10), data);
  wait(*world[2], other);
  wait(*world[0], send0);
  CHECK(from0 == data);
  CHECK_NOTHROW(world[0]->check_failed());
  CHECK_NOTHROW(world[2]->check_failed());
  CHECK_THROWS_AS(world[1]->check_failed(), IoError);
  close_world(world);
}

TEST_CASE("tcp: a failure spares the calls the failing rank had finished") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "spared/");
  // A communicator's collectives in tag space 5; rank 0 fails after its call
  // #3, which rank 1 is still finishing (it waits for rank 2's part).
  const uint32_t tag = (5u << Spared::kSpaceShift) | 1;
  std::vector<std::byte> got(10), part(10, std::byte{7});
  auto finishing = world[1]->irecv(2, tag, sig_of(3, 10), got);
  auto next = world[1]->irecv(2, tag, sig_of(4, 10), got);
  world[0]->fail(CHORUS_ERR_TIMEOUT, "rank 0: allreduce #4 timed out", Spared{{{5, 3}}});
  // Call #4 fails at rank 1 with rank 0's code and message...
  std::string message;
  CHECK(error_code(*world[1], next, &message) == CHORUS_ERR_TIMEOUT);
  CHECK_THAT(message, Catch::Contains("rank 0: allreduce #4 timed out") &&
                          Catch::Contains("reported by rank 0"));
  // ...while #3 goes on: rank 2's part is still sent and received.
  CHECK_NOTHROW(world[1]->check_call(tag, sig_of(3, 10)));
  CHECK_THROWS(world[1]->check_call(tag, sig_of(4, 10)));
  auto send = world[2]->isend(1, tag, sig_of(3, 10), part);
  CHECK(error_code(*world[2], send) == CHORUS_SUCCESS);
  CHECK(error_code(*world[1], finishing) == CHORUS_SUCCESS);
  CHECK(got == part);
  // Point-to-point messages and other tag spaces are never spared (once rank
  // 2 has the notice).
  REQUIRE(first_error([&] { world[2]->check_failed(); }));
  auto p2p = world[2]->isend(1, (1u << 31) | tag, sig_of(3, 10), part);
  CHECK(error_code(*world[2], p2p) == CHORUS_ERR_TIMEOUT);
  auto other = world[2]->isend(1, (6u << Spared::kSpaceShift) | 1, sig_of(1, 10), part);
  CHECK(error_code(*world[2], other) == CHORUS_ERR_TIMEOUT);
  close_world(world);
}

TEST_CASE("tcp: a peer that announces another call with the same number is a mismatch") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 2, "announce/");
  const uint32_t tag = (3u << Spared::kSpaceShift) | 1;
  CallSignature theirs = sig_of(5, 10), mine = sig_of(5, 10);
  theirs.kind = static_cast<uint8_t>(CollectiveKind::broadcast);
  world[0]->announce(1, tag, theirs);
  // The announcement arrives in the background.
  const auto error = first_error([&] { world[1]->check_announced(tag, mine); });
  REQUIRE(error);
  CHECK(error->code() == CHORUS_ERR_MISMATCH);
  CHECK_THAT(error->what(), Catch::Contains("rank 0 called broadcast #5") &&
                                Catch::Contains("rank 1 called allreduce #5"));
  // Another team's tag in the same space (a hierarchical call's stage on
  // another team) under the same number: the same mismatch.
  const auto staged = first_error([&] { world[1]->check_announced(tag + 1, mine); });
  REQUIRE(staged);
  CHECK(staged->code() == CHORUS_ERR_MISMATCH);
  CHECK_THAT(staged->what(), Catch::Contains("rank 0 called broadcast #5"));
  // Another number, another tag space or the same call: no mismatch.
  CHECK_NOTHROW(world[1]->check_announced(tag, sig_of(6, 10)));
  CHECK_NOTHROW(world[1]->check_announced((4u << Spared::kSpaceShift) | 1, mine));
  CHECK_NOTHROW(world[1]->check_announced(tag, theirs));
  // Point-to-point numbers count per peer and tag: there only the same tag
  // is the same message.
  const uint32_t p2p = kPointToPointTag | (3u << Spared::kSpaceShift) | 1;
  world[0]->announce(1, p2p, theirs);
  REQUIRE(first_error([&] { world[1]->check_announced(p2p, mine); }));
  CHECK_NOTHROW(world[1]->check_announced(p2p + 1, mine));
  close_world(world);
}

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

TEST_CASE("tcp: a receive from a rank that left fails instead of hanging") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 2, "left/");
  std::vector<std::byte> got(10);
  auto recv = world[1]->irecv(0, 1, sig_of(1, 10), got);
  std::thread closer([&] { world[0]->close(); });
  std::string message;
  CHECK(error_code(*world[1], recv, &message) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("rank 0 left"));
  world[1]->close();
  closer.join();
}

TEST_CASE("tcp: a receive on another tag is not held up by a large frame parked in the socket") {
  // Large unexpected frames wait in the socket until their receive is posted;
  // a receive for a later frame of another tag must still complete.
  TcpStoreServer server(kToken);
  auto world = make_world(server, 2, "parked/");
  auto big = pattern(1 << 20, 1), small = pattern(100, 2);
  auto s1 = world[0]->isend(1, 6, sig_of(1, big.size()), big);
  auto s2 = world[0]->isend(1, 7, sig_of(2, small.size()), small);
  wait_for_arrival(*world[1], 0, 6);
  std::vector<std::byte> got_small(small.size()), got_big(big.size());
  auto r2 = world[1]->irecv(0, 7, sig_of(2, small.size()), got_small);
  wait(*world[1], r2);
  CHECK(got_small == small);
  auto r1 = world[1]->irecv(0, 6, sig_of(1, big.size()), got_big);
  wait(*world[1], r1);
  wait(*world[0], s1);
  wait(*world[0], s2);
  CHECK(got_big == big);
  close_world(world);
}

TEST_CASE("tcp: a large frame of another call parked in the socket is a mismatch") {
  // The parked frame holds back what its sender sent after it (its
  // announcements, its failure notice): a wait outside the transport that
  // posts no receive for it (shared memory) learns of the mismatch from the
  // frame's header instead of at its peer's close.
  TcpStoreServer server(kToken);
  auto world = make_world(server, 2, "parked-mismatch/");
  const uint32_t tag = (3u << Spared::kSpaceShift) | 1;
  auto big = pattern(1 << 20, 5);
  CallSignature theirs = sig_of(5, big.size() / 4);
  theirs.kind = static_cast<uint8_t>(CollectiveKind::reduce_scatter);
  const CallSignature mine = sig_of(5, 10);
  auto sent = world[0]->isend(1, tag, theirs, big);
  wait_for_arrival(*world[1], 0, tag);
  const auto error = first_error([&] { world[1]->check_announced(tag, mine); });
  REQUIRE(error);
  CHECK(error->code() == CHORUS_ERR_MISMATCH);
  CHECK_THAT(error->what(), Catch::Contains("rank 0 called reduce_scatter #5") &&
                                Catch::Contains("rank 1 called allreduce #5"));
  // An earlier call of this rank, another tag or the same call: no mismatch.
  CHECK_NOTHROW(world[1]->check_announced(tag, sig_of(4, 10)));
  CHECK_NOTHROW(world[1]->check_announced((4u << Spared::kSpaceShift) | 1, mine));
  CHECK_NOTHROW(world[1]->check_announced(tag, theirs));
  std::vector<std::byte> got(big.size());
  auto received = world[1]->irecv(0, tag, theirs, got);
  wait(*world[1], received);
  wait(*world[0], sent);
  CHECK(got == big);
  close_world(world);
}

TEST_CASE("tcp: a peer that leaves with a large frame parked in the socket") {
  // What it sent before leaving still arrives; a receive for anything else
  // fails naming it, promptly (not at the receive's deadline).
  TcpStoreServer server(kToken);
  auto world = make_world(server, 2, "parked-left/");
  auto big = pattern(1 << 20, 3), small = pattern(100, 4);
  auto s1 = world[0]->isend(1, 6, sig_of(1, big.size()), big);
  auto s2 = world[0]->isend(1, 5, sig_of(2, small.size()), small);
  wait_for_arrival(*world[1], 0, 6);
  std::thread closer([&] { world[0]->close(); });
  std::vector<std::byte> got(10), got_big(big.size()), got_small(small.size());
  auto start = std::chrono::steady_clock::now();
  auto r = world[1]->irecv(0, 7, sig_of(3, 10), got);
  std::string message;
  CHECK(error_code(*world[1], r, &message) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("rank 0"));
  // Well before the close timeout (10 s), whose expiry would also end it.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(8));
  auto r1 = world[1]->irecv(0, 6, sig_of(1, big.size()), got_big);
  auto r2 = world[1]->irecv(0, 5, sig_of(2, small.size()), got_small);
  CHECK(error_code(*world[1], r1) == CHORUS_SUCCESS);
  CHECK(error_code(*world[1], r2) == CHORUS_SUCCESS);
  CHECK(got_big == big);
  CHECK(got_small == small);
  auto after = world[1]->irecv(0, 5, sig_of(4, 100), got_small);
  CHECK(error_code(*world[1], after) == CHORUS_ERR_PEER_FAILURE);
  CHECK(s1->done());
  CHECK(s2->done());
  CHECK(error_code(*world[0], s1) == CHORUS_SUCCESS);
  CHECK(error_code(*world[0], s2) == CHORUS_SUCCESS);
  world[1]->close();
  closer.join();
}

namespace {

// Whether the other end closed the connection without sending anything
// (waits up to 10 s; sockets from connect_with_retry are non-blocking).
bool closed_without_answer(const Fd& fd) {
  pollfd p{fd.get(), POLLIN, 0};
  if (::poll(&p, 1, 10000) != 1) return false;
  char byte;
  return ::recv(fd.get(), &byte, 1, 0) == 0;
}

}  // namespace

TEST_CASE("tcp: strangers with a wrong token or garbage are refused; the job goes on") {
  TcpStoreServer server(kToken);
  TcpStoreClient store(server.address(), kToken, Deadline::after(std::chrono::seconds(10)));
  std::unique_ptr<TcpTransport> rank0;
  std::thread t([&] { rank0 = std::make_unique<TcpTransport>(store, options_for(0, 2, "s/")); });
  // A wrong token during set-up: closed without an answer.
  {
    Fd fd = fake_rank1(server, "s/", "wrong");
    CHECK(closed_without_answer(fd));
  }
  // The right token with a purpose other than connecting, during set-up:
  // an ask (after set-up only), and one no build knows.
  for (uint16_t purpose : {static_cast<uint16_t>(HelloPurpose::ask), uint16_t{7}}) {
    INFO("purpose " << purpose);
    Fd fd = fake_rank1(server, "s/", kToken, closed_address(), purpose);
    CHECK(closed_without_answer(fd));
  }
  // Garbage during set-up: closed too.
  {
    auto addr = store.get("s/addr/0", Deadline::after(std::chrono::seconds(10)));
    Fd fd = bootstrap::connect_with_retry(addr, Deadline::after(std::chrono::seconds(10)));
    std::vector<std::byte> junk(sizeof(Hello), std::byte{0x41});
    write_all(fd.get(), junk, Deadline::after(std::chrono::seconds(10)));
    CHECK(closed_without_answer(fd));
  }
  // The real rank 1 still gets in.
  TcpStoreClient store1(server.address(), kToken, Deadline::after(std::chrono::seconds(10)));
  TcpTransport rank1(store1, options_for(1, 2, "s/"));
  t.join();
  // After set-up, even a right token is refused (the pair is connected).
  {
    Fd fd = fake_rank1(server, "s/", kToken);
    CHECK(closed_without_answer(fd));
  }
  std::vector<std::byte> data = pattern(5000, 1), got(5000);
  auto r = rank1.irecv(0, 1, sig_of(1, 1), got);
  auto s = rank0->isend(1, 1, sig_of(1, 1), data);
  wait(rank1, r);
  wait(*rank0, s);
  CHECK(got == data);
  std::thread closer([&] { rank0->close(); });
  rank1.close();
  closer.join();
}

TEST_CASE("tcp: with isolated peer failures, a lost connection fails only that peer") {
  WithFakeRank1 pair("lost/", [](TcpOptions& o) { o.isolate_peer_failures = true; });
  auto& rank0 = pair.rank0;
  auto& fd = pair.fd;
  std::vector<std::byte> got(16);
  auto recv = rank0->irecv(1, 1, sig_of(1, 4), got);
  fd.reset();  // dies without a goodbye
  std::string message;
  CHECK(error_code(*rank0, recv, &message) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("rank 1 failed"));
  CHECK_NOTHROW(rank0->check_failed());
  auto later = rank0->isend(1, 1, sig_of(2, 4), got);
  CHECK(error_code(*rank0, later, &message) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("rank 1 failed"));
  rank0.reset();
}

TEST_CASE("tcp: a malformed frame or a lost connection is a peer failure naming the peer") {
  for (bool malformed : {true, false}) {
    WithFakeRank1 pair("m/");
    auto& rank0 = pair.rank0;
    auto& fd = pair.fd;
    std::vector<std::byte> got(16);
    auto recv = rank0->irecv(1, 1, sig_of(1, 4), got);
    if (malformed) {
      auto h = make_frame(FrameType::data, 1, 16, sig_of(1, 4));
      h.magic = 0x12345678;
      write_all(fd.get(), bytes_of(h), Deadline::after(std::chrono::seconds(10)));
    } else {
      fd.reset();  // dies without a goodbye
    }
    std::string message;
    CHECK(error_code(*rank0, recv, &message) == CHORUS_ERR_PEER_FAILURE);
    CHECK_THAT(message, Catch::Contains("rank 1"));
    if (malformed) CHECK_THAT(message, Catch::Contains("magic"));
    fd.reset();
    rank0.reset();
  }
}

TEST_CASE("tcp: a rank that dies spares the calls in progress here: what it sent is taken") {
  // Rank 1 sends its part of call #3 and dies (no goodbye) while rank 0 is
  // still in #3: rank 0 takes that part, and fails at once what #3 still
  // wants from rank 1 that never came, and every later call.
  WithFakeRank1 pair("d/");
  auto& rank0 = pair.rank0;
  auto& fd = pair.fd;
  const uint32_t tag = (5u << Spared::kSpaceShift) | 1, other_tag = tag + 1;
  rank0->board().slot(tag).enter(sig_of(3, 16));
  std::vector<std::byte> never(16);
  auto posted = rank0->irecv(1, other_tag, sig_of(3, 16), never);  // rank 1 never sends it
  const auto part = pattern(16, 3);
  const auto header = make_frame(FrameType::data, tag, part.size(), sig_of(3, 16));
  write_all(fd.get(), bytes_of(header), Deadline::after(std::chrono::seconds(10)));
  write_all(fd.get(), part, Deadline::after(std::chrono::seconds(10)));
  fd.reset();  // dies without a goodbye
  check_death_spared_call(*rank0, posted, tag, part);
  rank0->board().slot(tag).leave(sig_of(3, 16), false);
  rank0.reset();
}

// The verdict round (collectives/verdict/agree.hpp) over TCP, rank 0 real and
// rank 1 played by hand: its have, its death, its failure notice, its silence.
namespace {

enum class Rank1 {
  has_then_dies,
  dies_without_have,
  fails_call,
  silent,
  sends_garbage,
  // Alive, but the network drops the connection (its stream ends) before its
  // have: it answers rank 0's probe with its part of #4 (the call) not done
  // (it finished #3), or done
  dropped_unfinished,
  dropped_finished,
  // Alive, its end of the connection lost: it probes rank 0, its part of #4 done
  probes_finished,
  // Alive, its have late: rank 0's deadline passes in the round and it asks
  // whether rank 1's part is done. Rank 1 says yes and its have follows, or
  // says no (sealed, it will send none).
  late_have,
  late_not_done,
};

// Checks made on the threads that play rank 1 (Catch's assertions belong to
// the test's thread): a failure is thrown, and rethrown by the future's get.
void expect(bool holds, const char* what) {
  if (!holds) throw std::runtime_error(std::string("rank 1's side: expected ") + what);
}

// Reads a notice frame (header and payload) off fd; returns the calls it spares.
Spared read_notice_frame(const Fd& fd) {
  FrameHeader h{};
  read_exact(fd.get(), writable_bytes_of(h), Deadline::after(std::chrono::seconds(10)));
  expect(!validate_frame(bytes_of(h)), "a valid frame header");
  expect(static_cast<FrameType>(h.type) == FrameType::abort,
         "static_cast<FrameType>(h.type) == FrameType::abort");
  std::string payload(h.length, '\0');
  read_exact(fd.get(), std::as_writable_bytes(std::span(payload)),
             Deadline::after(std::chrono::seconds(10)));
  std::string message;
  Spared spared;
  expect(decode_notice(payload, message, spared), "decode_notice(payload, message, spared)");
  return spared;
}

void write_notice_frame(const Fd& fd, const Spared& spared) {
  const std::string text = encode_notice("rank 1 is alive", spared, 4096);
  const auto h = make_frame(FrameType::abort, CHORUS_ERR_PEER_FAILURE, text.size(), {});
  write_all(fd.get(), bytes_of(h), Deadline::after(std::chrono::seconds(10)));
  write_all(fd.get(), std::as_bytes(std::span(text)), Deadline::after(std::chrono::seconds(10)));
}

// Rank 1's listener answering rank 0's probe as a live rank that finished
// `finished` (in tag's space); returns what rank 0 said it finished.
Spared answer_probe_as_rank1(const Fd& listener, uint32_t space, uint64_t finished) {
  pollfd pfd{listener.get(), POLLIN, 0};
  expect(::poll(&pfd, 1, 10000) == 1, "::poll(&pfd, 1, 10000) == 1");
  Fd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  expect(conn.valid(), "an accepted connection");
  Hello hello{};
  read_exact(conn.get(), writable_bytes_of(hello), Deadline::after(std::chrono::seconds(10)));
  expect(!validate_hello(bytes_of(hello), kToken, 1, 2), "a valid hello");
  expect(hello.purpose == static_cast<uint16_t>(HelloPurpose::probe),
         "hello.purpose == static_cast<uint16_t>(HelloPurpose::probe)");
  const HelloAck ack{kHelloMagic, 0};
  write_all(conn.get(), bytes_of(ack), Deadline::after(std::chrono::seconds(10)));
  Spared mine;
  mine.entries.push_back({space, finished});
  write_notice_frame(conn, mine);
  return read_notice_frame(conn);  // rank 0 vouches once it knows rank 1 is alive
}

// notice_back: whether rank 0 then sent rank 1 a failure notice.
chorus_result_t verdict_with(Rank1 what, std::string* message, bool* notice_back = nullptr) {
  uint16_t rank1_port = 0;
  Fd rank1_listener = listen_on("127.0.0.1", &rank1_port);
  const bool alive = what == Rank1::dropped_unfinished || what == Rank1::dropped_finished;
  WithFakeRank1 pair(
      "v/", {}, alive ? bootstrap::format_host_port("127.0.0.1", rank1_port) : closed_address());
  if (!alive) rank1_listener.reset();
  TcpTransport& rank0 = *pair.rank0;
  const uint32_t tag = (6u << Spared::kSpaceShift) | 1;
  const CallSignature sig = sig_of(4, 16);
  rank0.board().slot(tag).enter(sig);
  rank0.board().slot(tag).part_done(sig);  // as Communicator::execute marks it for the round
  Team team = Team::of(rank0, {0, 1}, tag, nullptr, "world");
  ScratchPool scratch;
  const bool late = what == Rank1::late_have || what == Rank1::late_not_done;
  const auto deadline =
      Deadline::after(std::chrono::milliseconds(what == Rank1::silent || late ? 300 : 10000));
  CollectiveContext ctx = CollectiveContext::over(team, scratch, sig, deadline, 0, Spin{});
  auto send_frame = [&](FrameType type, uint32_t frame_tag, const CallSignature& s,
                        std::span<const std::byte> payload) {
    const auto header = make_frame(type, frame_tag, payload.size(), s);
    write_all(pair.fd.get(), bytes_of(header), Deadline::after(std::chrono::seconds(10)));
    if (!payload.empty())
      write_all(pair.fd.get(), payload, Deadline::after(std::chrono::seconds(10)));
  };
  switch (what) {
    case Rank1::has_then_dies:
      send_frame(FrameType::data, tag, sig, {});
      pair.fd.reset();
      break;
    case Rank1::dies_without_have:
      pair.fd.reset();
      break;
    case Rank1::fails_call: {  // it finished #3 only
      Spared spared;
      spared.entries.push_back({tag >> Spared::kSpaceShift, 3});
      const std::string notice = encode_notice("rank 1: its part of #4 never came", spared, 4096);
      send_frame(FrameType::abort, static_cast<uint32_t>(CHORUS_ERR_PEER_FAILURE), CallSignature{},
                 std::as_bytes(std::span(notice)));
      break;
    }
    case Rank1::silent:
      break;
    case Rank1::sends_garbage: {  // alive, but its stream is broken
      auto h = make_frame(FrameType::data, tag, 0, sig);
      h.magic = 0x12345678;
      write_all(pair.fd.get(), bytes_of(h), Deadline::after(std::chrono::seconds(10)));
      break;
    }
    case Rank1::dropped_unfinished:
    case Rank1::dropped_finished:
      ::shutdown(pair.fd.get(), SHUT_RDWR);  // as a reset by the network
      break;
    case Rank1::probes_finished:
    case Rank1::late_have:
    case Rank1::late_not_done:
      break;
  }
  // Rank 1 reads what rank 0 sends (its have, its announcements) up to the
  // ask about #4's part, answers it, and then sends its have or nothing.
  std::future<bool> asked_part_done;
  if (late) {
    asked_part_done = std::async(std::launch::async, [&] {
      while (true) {
        FrameHeader h{};
        read_exact(pair.fd.get(), writable_bytes_of(h), Deadline::after(std::chrono::seconds(10)));
        std::vector<std::byte> payload(h.length);
        read_exact(pair.fd.get(), payload, Deadline::after(std::chrono::seconds(10)));
        if (static_cast<FrameType>(h.type) != FrameType::ask) continue;
        expect(h.sig == sig, "the ask is about #4");
        const bool part_done = (h.flags & kAskPartDone) != 0;
        auto answer = make_frame(FrameType::answer, h.tag, 0, h.sig);
        answer.flags = what == Rank1::late_have ? kAnswerPartDone : 0;
        write_all(pair.fd.get(), bytes_of(answer), Deadline::after(std::chrono::seconds(10)));
        if (what == Rank1::late_have) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          send_frame(FrameType::data, tag, sig, {});
        }
        return part_done;
      }
    });
  }
  const uint32_t space = tag >> Spared::kSpaceShift;
  // Rank 1's side of a probe, while rank 0 waits in the round.
  std::future<Spared> rank0_finished;
  if (alive) {
    rank0_finished = std::async(std::launch::async, [&] {
      return answer_probe_as_rank1(rank1_listener, space, what == Rank1::dropped_finished ? 4 : 3);
    });
  } else if (what == Rank1::probes_finished) {
    rank0_finished = std::async(std::launch::async, [&] {
      Fd conn = bootstrap::connect_with_retry(
          bootstrap::format_host_port("127.0.0.1", rank0.listen_port()),
          Deadline::after(std::chrono::seconds(10)));
      const Hello hello = make_hello(kToken, 1, 0, 2, HelloPurpose::probe);
      write_all(conn.get(), bytes_of(hello), Deadline::after(std::chrono::seconds(10)));
      HelloAck ack{};
      read_exact(conn.get(), writable_bytes_of(ack), Deadline::after(std::chrono::seconds(10)));
      expect(ack.magic == kHelloMagic, "ack.magic == kHelloMagic");
      expect(ack.accepted_rank == 1, "ack.accepted_rank == 1");
      const Spared rank0_vouched = read_notice_frame(conn);
      Spared mine;
      mine.entries.push_back({space, 4});
      write_notice_frame(conn, mine);
      return rank0_vouched;
    });
  }
  chorus_result_t code = CHORUS_SUCCESS;
  try {
    agree_on_verdict(ctx);
  } catch (const Error& e) {
    code = e.code();
    if (message) *message = e.what();
  }
  if (asked_part_done.valid()) CHECK(asked_part_done.get());
  if (rank0_finished.valid()) {  // rank 0 told rank 1 its part of #4 was done
    const Spared told = rank0_finished.get();
    CHECK(told.covers(tag, sig));
    CHECK_FALSE(told.covers(tag, sig_of(5, 16)));
  }
  rank0.board().slot(tag).leave(sig, code == CHORUS_SUCCESS);
  if (notice_back) {  // the frames rank 0 sent rank 1, up to a notice
    *notice_back = false;
    FrameHeader back{};
    while (!*notice_back) {
      read_exact(pair.fd.get(), writable_bytes_of(back), Deadline::after(std::chrono::seconds(10)));
      std::vector<std::byte> payload(back.length);
      read_exact(pair.fd.get(), payload, Deadline::after(std::chrono::seconds(10)));
      *notice_back = static_cast<FrameType>(back.type) == FrameType::abort;
    }
  }
  pair.fd.reset();
  pair.rank0.reset();
  return code;
}

}  // namespace

TEST_CASE("verdict round: a peer that dies is not waited for, whether its have came or not") {
  // Its death spares the call rank 0 is in: whatever it sent is here, and
  // nothing more will come, so only the ranks still alive must have theirs.
  CHECK(verdict_with(Rank1::has_then_dies, nullptr) == CHORUS_SUCCESS);
  CHECK(verdict_with(Rank1::dies_without_have, nullptr) == CHORUS_SUCCESS);
}

TEST_CASE("verdict round: a peer that failed the call fails it here, with its message") {
  std::string message;
  CHECK(verdict_with(Rank1::fails_call, &message) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("its part of #4 never came"));
}

TEST_CASE("verdict round: a peer alive but silent is waited for until the deadline") {
  std::string message;
  CHECK(verdict_with(Rank1::silent, &message) == CHORUS_ERR_TIMEOUT);
  CHECK_THAT(message, Catch::Contains("rank 1"));
}

TEST_CASE("verdict round: a deadline that passes while a done peer's have is on its way") {
  // Rank 0's own have is sent: rank 1, with every have, may finish the call.
  // Asked, it says its part is done, so rank 0 waits for the have and
  // finishes too (failing there, the two would disagree).
  CHECK(verdict_with(Rank1::late_have, nullptr) == CHORUS_SUCCESS);
  // Its part not done, rank 1 is sealed and will send no have: both fail.
  std::string message;
  CHECK(verdict_with(Rank1::late_not_done, &message) == CHORUS_ERR_TIMEOUT);
  CHECK_THAT(message, Catch::Contains("timed out"));
}

TEST_CASE("verdict round: a live peer whose connection drops is not taken for dead") {
  // Its stream ends, but it answers rank 0's probe: a failure of both, which
  // spares what each finished and what the other's part is done for. Its
  // part of the call not done, the call fails (taken for dead, rank 0 would
  // finish it); done (only its have was lost), rank 0 finishes it too.
  std::string message;
  CHECK(verdict_with(Rank1::dropped_unfinished, &message) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("with both alive"));
  CHECK(verdict_with(Rank1::dropped_finished, nullptr) == CHORUS_SUCCESS);
  // Rank 1 lost its end first and probes rank 0, having finished the call.
  CHECK(verdict_with(Rank1::probes_finished, nullptr) == CHORUS_SUCCESS);
}

TEST_CASE("verdict round: a peer whose stream is corrupt is failed, not taken for dead") {
  // Rank 0 drops the broken stream, but rank 1 is alive: were it taken for
  // gone, each side could finish a call the other fails. Rank 0 fails the
  // call, and tells rank 1 so on its own stream before the connection ends.
  std::string message;
  bool notice_back = false;
  CHECK(verdict_with(Rank1::sends_garbage, &message, &notice_back) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("malformed frame"));
  CHECK(notice_back);
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
