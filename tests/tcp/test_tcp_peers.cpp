// The TCP transport against peers that are not what they should be: strangers
// with a wrong token or garbage, a connection lost, a malformed frame, a rank
// that dies in the middle of a call. Thread ranks of one process, real
// loopback sockets, bad peers made by hand.
#include <poll.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "base/core/error.hpp"
#include "tests/common/transport_test.hpp"
#include "tests/tcp/tcp_world.hpp"
#include "transports/tcp/socket.hpp"
#include "transports/tcp/tcp_transport.hpp"
#include "transports/tcp/wire.hpp"

using namespace chorus;
using namespace chorus::tcp;
using namespace chorus::test;

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
