// The TCP transport between thread ranks of one process, through a real
// store and real loopback sockets: matching, mismatches, aborts and the
// calls a failure spares, frames parked in a socket. The stuck-rank report
// and the call board: test_tcp_reports.cpp; against hand-made bad peers:
// test_tcp_peers.cpp; the verdict round: test_tcp_verdict.cpp.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "base/core/error.hpp"
#include "tests/common/transport_test.hpp"
#include "tests/tcp/tcp_world.hpp"
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

TEST_CASE("tcp: a gather send arrives as one message, pieces back to back") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 2, "gather/");
  auto& a = *world[0];
  auto& b = *world[1];
  CHECK(a.gathers_sends(1));
  // Empty pieces; more pieces than one sendmsg takes; a piece larger than
  // the socket's buffer (written in several turns, some starting inside it).
  std::vector<std::size_t> sizes = {0, 1, 100, 0};
  for (int k = 0; k < 300; ++k) sizes.push_back(4096 + static_cast<std::size_t>(k % 7));
  sizes.push_back(std::size_t(3) << 20);
  sizes.push_back(5);
  std::vector<std::vector<std::byte>> pieces;
  std::vector<std::span<const std::byte>> spans;
  std::vector<std::byte> whole;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    pieces.push_back(pattern(sizes[k], static_cast<int>(k)));
    whole.insert(whole.end(), pieces.back().begin(), pieces.back().end());
  }
  for (const auto& piece : pieces) spans.emplace_back(piece);
  for (bool receive_first : {true, false}) {
    INFO("receive posted " << (receive_first ? "first" : "later"));
    std::vector<std::byte> got(whole.size()), after(64);
    const auto sig = sig_of(receive_first ? 1 : 2, whole.size());
    RequestPtr recv;
    if (receive_first) recv = b.irecv(0, 1, sig, got);
    auto send = a.isend_gather(1, 1, sig, spans);
    // A plain message behind it: the stream stays framed.
    const auto next = pattern(after.size(), 9);
    auto send_next = a.isend(1, 1, sig_of(3, after.size()), next);
    if (!receive_first) {
      wait_for_arrival(b, 0, 1);
      recv = b.irecv(0, 1, sig, got);
    }
    auto recv_next = b.irecv(0, 1, sig_of(3, after.size()), after);
    wait(b, recv);
    wait(b, recv_next);
    wait(a, send);
    wait(a, send_next);
    REQUIRE(got == whole);
    REQUIRE(after == next);
  }
  close_world(world);
}

namespace {

// `total` bytes cut into pieces unlike any sender's: empty ones, odd sizes,
// more than one recvmsg takes, the rest in one.
std::vector<std::size_t> scatter_cuts(std::size_t total) {
  std::vector<std::size_t> cuts;
  std::size_t left = total;
  for (std::size_t k = 0; left > 0; ++k) {
    const std::size_t want = k % 5 == 0 ? 0 : k < 400 ? 1 + (k * 37) % 3001 : left;
    cuts.push_back(std::min(want, left));
    left -= cuts.back();
  }
  cuts.push_back(0);
  return cuts;
}

}  // namespace

TEST_CASE("tcp: a scatter receive fills its pieces in order, from a plain or a gather send") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 2, "scatter/");
  auto& a = *world[0];
  auto& b = *world[1];
  CHECK(b.scatters_recvs(0));
  uint64_t seq = 0;
  // 3000 bytes come through the staging buffer (kept as unexpected when
  // early); 3.5 MiB straight from the socket (parked in it when early).
  for (std::size_t n : {std::size_t(3000), (std::size_t(7) << 20) / 2}) {
    const auto data = pattern(n, static_cast<int>(n % 89));
    const auto cuts = scatter_cuts(n);
    for (bool gather : {false, true}) {
      for (bool receive_first : {true, false}) {
        INFO(n << " bytes into " << cuts.size() << " pieces, " << (gather ? "gather" : "plain")
               << " send, receive posted " << (receive_first ? "first" : "later"));
        std::vector<std::vector<std::byte>> got;
        std::vector<std::span<std::byte>> into;
        for (std::size_t c : cuts) got.emplace_back(c);
        for (auto& piece : got) into.emplace_back(piece);
        const auto sig = sig_of(++seq, n);
        RequestPtr recv, send;
        if (receive_first) recv = b.irecv_scatter(0, 1, sig, into);
        if (gather) {
          const std::size_t half = n / 2;
          const std::vector<std::span<const std::byte>> halves = {std::span(data).first(half),
                                                                  std::span(data).subspan(half)};
          send = a.isend_gather(1, 1, sig, halves);
        } else {
          send = a.isend(1, 1, sig, data);
        }
        // A plain message behind it: the stream stays framed.
        const auto next = pattern(64, 5);
        std::vector<std::byte> after(next.size());
        auto send_next = a.isend(1, 1, sig_of(++seq, next.size()), next);
        if (!receive_first) {
          wait_for_arrival(b, 0, 1);
          recv = b.irecv_scatter(0, 1, sig, into);
        }
        auto recv_next = b.irecv(0, 1, sig_of(seq, next.size()), after);
        wait(b, recv);
        wait(b, recv_next);
        wait(a, send);
        wait(a, send_next);
        std::vector<std::byte> joined;
        for (const auto& piece : got) joined.insert(joined.end(), piece.begin(), piece.end());
        REQUIRE(joined == data);
        REQUIRE(after == next);
      }
    }
  }
  // Pieces that do not add up to the message: a mismatch that names both lengths.
  const auto data = pattern(5000, 3);
  std::vector<std::byte> one(3000), two(1999);
  const std::vector<std::span<std::byte>> into = {one, two};
  const auto sig = sig_of(++seq, data.size());
  auto recv = b.irecv_scatter(0, 1, sig, into);
  auto send = a.isend(1, 1, sig, data);
  CHECK_THROWS_WITH(wait(b, recv), Catch::Contains("4999") && Catch::Contains("5000"));
  wait(a, send);
  close_world(world);
}

TEST_CASE("transport: one that does not gather sends or scatter receives says so and refuses") {
  NoDataTransport stub(0, 2);
  CHECK_FALSE(stub.gathers_sends(1));
  CHECK_FALSE(stub.scatters_recvs(1));
  std::vector<std::byte> piece(8);
  const std::vector<std::span<const std::byte>> spans = {piece, piece};
  CHECK_THROWS_AS(stub.isend_gather(1, 1, sig_of(1, 16), spans), InvariantError);
  const std::vector<std::span<std::byte>> into = {piece, piece};
  CHECK_THROWS_AS(stub.irecv_scatter(1, 1, sig_of(1, 16), into), InvariantError);
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
  check_mismatches_reported(*world[0], *world[1]);
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
