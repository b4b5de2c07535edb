// The UCX transport between thread ranks of one process, through a real store:
// its TLS lists, headers, messages, mismatches, aborts and shared memory.
// Registered twice: with the default UCX settings (shared memory) and with
// UCX_TLS=tcp. Peers in other processes and lost endpoints:
// test_ucx_peers.cpp.
#include <catch2/catch.hpp>

#include <cstring>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "base/core/error.hpp"
#include "tests/common/transport_test.hpp"
#include "tests/ucx/ucx_world.hpp"
#include "transports/ucx/ucx_tls.hpp"
#include "transports/ucx/ucx_transport.hpp"

using namespace chorus;
using namespace chorus::ucx;
using namespace chorus::test;

namespace {

bool names_shm(const std::string& endpoint_info) {
  for (const char* tl : {"posix/", "sysv/", "xpmem/", "cma/", "knem/"})
    if (endpoint_info.find(tl) != std::string::npos) return true;
  return false;
}

// Lines of ucp_ep_print_info's lane table ("lane[N]: ... transport/device")
// that do not name `transport`.
int lanes_not_over(const std::string& endpoint_info, const std::string& transport) {
  int others = 0;
  std::size_t pos = 0;
  while ((pos = endpoint_info.find("lane[", pos)) != std::string::npos) {
    auto end = endpoint_info.find('\n', pos);
    auto line = endpoint_info.substr(pos, end == std::string::npos ? end : end - pos);
    if (line.find(transport) == std::string::npos) ++others;
    pos = end == std::string::npos ? endpoint_info.size() : end;
  }
  return others;
}

}  // namespace

TEST_CASE("ucx: UCX_TLS lists with and without shared memory") {
  CHECK(tls_may_use_shm("all"));
  CHECK(tls_may_use_shm("sm,tcp"));
  CHECK(tls_may_use_shm("^ib"));
  CHECK(tls_may_use_shm("^mm"));  // cma and knem remain
  CHECK_FALSE(tls_may_use_shm("tcp"));
  CHECK_FALSE(tls_may_use_shm("^sm"));
  CHECK_FALSE(tls_may_use_shm("^posix,sysv,xpmem,knem,cma,ib"));
  CHECK_FALSE(tls_may_use_shm("\\sm,tcp"));  // an explicit (unaliased) name, not the alias
  CHECK(tls_without_shm("all") == "^sm");
  CHECK(tls_without_shm("^ib") == "^ib,sm");
  CHECK(tls_without_shm("sm,tcp,self") == "tcp,self");
  CHECK(tls_without_shm("posix, cma ,tcp") == "tcp");
  CHECK(tls_without_shm("tcp") == "tcp");
  CHECK(tls_without_shm("^sm") == "^sm");
  CHECK_FALSE(tls_without_shm("shm").has_value());
  CHECK_FALSE(tls_without_shm("mm,cma").has_value());
}

TEST_CASE("ucx: headers from the wire are validated") {
  auto h = make_lead(7, 100, false, sig_of(1, 25));
  CHECK_FALSE(validate_lead(h, sizeof h + 100, 7));
  CHECK(validate_lead(h, sizeof h + 99, 7));   // length disagrees with what arrived
  CHECK(validate_lead(h, sizeof h + 100, 8));  // another job
  CHECK(validate_lead(h, 20, 7));              // truncated
  auto bad = h;
  bad.magic = 0x12345678;
  CHECK_THAT(*validate_lead(bad, sizeof h + 100, 7), Catch::Contains("magic"));
  auto bulk = make_lead(7, 1 << 20, true, sig_of(1, 25));
  CHECK_FALSE(validate_lead(bulk, sizeof bulk, 7));
  CHECK(validate_lead(bulk, sizeof bulk + 1, 7));
  auto c = make_control(ControlType::abort, 7);
  c.length = 10;
  CHECK_FALSE(validate_control(c, sizeof c + 10, 7));
  CHECK(validate_control(c, sizeof c + 9, 7));
  c.length = kMaxReason + 1;
  CHECK(validate_control(c, sizeof c + kMaxReason + 1, 7));
  CHECK(make_tag(TagKind::bulk, 5, 0xdeadbeef) ==
        ((uint64_t(1) << 62) | (uint64_t(5) << 32) | 0xdeadbeef));
  CHECK(tag_rank(make_tag(TagKind::control, kMaxRanks - 1, 3)) == kMaxRanks - 1);
}

TEST_CASE("ucx: messages of every size arrive intact, posted before or after arrival") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 2, "sizes/");
  auto& a = *world[0];
  auto& b = *world[1];
  for (std::size_t n :
       {std::size_t(0), std::size_t(1), std::size_t(8), std::size_t(4095), std::size_t(4096),
        std::size_t(32767), std::size_t(32768), std::size_t(65536), std::size_t(65536 + 56),
        std::size_t(100003), std::size_t(9) << 20}) {
    for (bool receive_first : {true, false}) {
      INFO("message of " << n << " bytes, receive posted " << (receive_first ? "first" : "later"));
      auto data = pattern(n, static_cast<int>(n % 97));
      std::vector<std::byte> got(n);
      RequestPtr recv, send;
      auto sig = sig_of(n, n);
      if (receive_first) recv = b.irecv(0, 1, sig, got);
      send = a.isend(1, 1, sig, data);
      if (!receive_first) {
        wait_for_arrival(b, 0, 1);  // held by UCX as unexpected
        recv = b.irecv(0, 1, sig, got);
      }
      wait(b, recv);
      wait(a, send);
      REQUIRE(got == data);
    }
  }
  close_world(world);
}

TEST_CASE("ucx: messages with one tag match in order, small and large mixed; tags independent") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "order/");
  const int kCount = 24;
  auto size_of = [](int i) -> std::size_t { return i % 3 == 0 ? 70000 + i : 1000 + i; };
  std::vector<std::vector<std::byte>> sent, got;
  std::vector<RequestPtr> sends, recvs;
  for (int i = 0; i < kCount; ++i) {
    sent.push_back(pattern(size_of(i), i));
    got.emplace_back(size_of(i));
  }
  // Tag 2 receives are posted first but the tag 1 messages must not land there.
  for (int i = kCount / 2; i < kCount; ++i)
    recvs.push_back(world[2]->irecv(1, 2, sig_of(i, 0), got[i]));
  for (int i = 0; i < kCount; ++i)
    sends.push_back(world[1]->isend(2, i < kCount / 2 ? 1 : 2, sig_of(i, 0), sent[i]));
  for (int i = 0; i < kCount / 2; ++i) recvs.push_back(world[2]->irecv(1, 1, sig_of(i, 0), got[i]));
  for (auto& r : recvs) wait(*world[2], r);
  for (auto& s : sends) wait(*world[1], s);
  for (int i = 0; i < kCount; ++i) REQUIRE(got[i] == sent[i]);
  close_world(world);
}

TEST_CASE("ucx: a mismatched call fails the receive naming both ranks and both calls") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 2, "mismatch/");
  check_mismatches_reported(*world[0], *world[1]);
  std::string message;
  // A large message of another call is refused before any byte reaches the
  // buffer, and the next message with the tag still matches.
  auto big = pattern(200000, 3);
  std::vector<std::byte> big_got(big.size());
  auto big_send = world[0]->isend(1, 1, sig_of(6, 50000), big);
  auto big_recv = world[1]->irecv(0, 1, sig_of(7, 50000), big_got);
  CHECK(error_code(*world[1], big_recv, &message) == CHORUS_ERR_MISMATCH);
  CHECK_THAT(message, Catch::Contains("rank 0 called allreduce #6") &&
                          Catch::Contains("rank 1 called allreduce #7"));
  CHECK(big_got == std::vector<std::byte>(big.size()));
  wait(*world[0], big_send);
  auto big2 = pattern(200000, 4);
  auto next_send = world[0]->isend(1, 1, sig_of(8, 50000), big2);
  auto next_recv = world[1]->irecv(0, 1, sig_of(8, 50000), big_got);
  wait(*world[1], next_recv);
  wait(*world[0], next_send);
  CHECK(big_got == big2);
  close_world(world);
}

TEST_CASE("ucx: abort fails the peers' pending receives with the reason") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "abort/");
  std::vector<std::byte> got(10), big(1 << 20);
  auto recv = world[2]->irecv(1, 1, sig_of(1, 10), got);
  auto pending = world[0]->irecv(2, 1, sig_of(1, 1 << 20), big);
  world[0]->abort("test reason");
  CHECK(pending->done());  // failed (and cancelled inside UCX) before abort returned
  std::string message;
  CHECK(error_code(*world[2], recv, &message) == CHORUS_ERR_ABORTED);
  CHECK_THAT(message, Catch::Contains("rank 0 aborted: test reason"));
  auto recv1 = world[1]->irecv(0, 1, sig_of(1, 10), got);
  CHECK(error_code(*world[1], recv1) == CHORUS_ERR_ABORTED);
  // Later requests fail at once.
  auto later = world[1]->isend(2, 1, sig_of(2, 10), got);
  CHECK(error_code(*world[1], later) == CHORUS_ERR_ABORTED);
  CHECK_THROWS_AS(world[2]->check_failed(), IoError);
  close_world(world);
}

TEST_CASE("ucx: fail_peer fails what involves that peer, and only that") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 3, "failpeer/", [](UcxOptions& o) { o.close_timeout_s = 1; });
  std::vector<std::byte> got(100), from0(100), big = pattern(1 << 20, 1);
  auto recv = world[2]->irecv(1, 1, sig_of(1, 100), got);
  auto send = world[2]->isend(1, 2, sig_of(1, 1 << 20), big);  // never received
  auto other = world[2]->irecv(0, 1, sig_of(1, 100), from0);
  world[2]->fail_peer(1, CHORUS_ERR_PEER_FAILURE, "rank 1 died (seen by the control channel)");
  std::string message;
  CHECK(error_code(*world[2], recv, &message) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("rank 1 died"));
  CHECK(error_code(*world[2], send) == CHORUS_ERR_PEER_FAILURE);
  auto later = world[2]->irecv(1, 1, sig_of(2, 100), got);
  CHECK(later->done());
  CHECK(error_code(*world[2], later) == CHORUS_ERR_PEER_FAILURE);
  // Rank 0 is unaffected.
  auto data = pattern(100, 9);
  auto send0 = world[0]->isend(2, 1, sig_of(1, 100), data);
  wait(*world[2], other);
  wait(*world[0], send0);
  CHECK(from0 == data);
  CHECK_NOTHROW(world[2]->check_failed());
  close_world(world);
}

TEST_CASE("ucx: a receive from a rank that left fails; what it sent before still arrives") {
  TcpStoreServer server(kToken);
  auto world = make_world(server, 2, "left/");
  auto small = pattern(100, 1), large = pattern(300000, 2);
  auto s1 = world[0]->isend(1, 5, sig_of(1, 100), small);
  auto s2 = world[0]->isend(1, 6, sig_of(1, 300000), large);
  std::vector<std::byte> got(10), got_small(100), got_large(300000);
  auto recv = world[1]->irecv(0, 7, sig_of(1, 10), got);
  std::thread closer([&] { world[0]->close(); });
  std::string message;
  CHECK(error_code(*world[1], recv, &message) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("rank 0 left"));
  auto r1 = world[1]->irecv(0, 5, sig_of(1, 100), got_small);
  auto r2 = world[1]->irecv(0, 6, sig_of(1, 300000), got_large);
  wait(*world[1], r1);
  wait(*world[1], r2);
  CHECK(got_small == small);
  CHECK(got_large == large);
  // A rendezvous send completes when the receiver's acknowledgement reaches
  // rank 0, which may come after rank 1's receive completed: wait for it.
  CHECK(error_code(*world[0], s1) == CHORUS_SUCCESS);
  CHECK(error_code(*world[0], s2) == CHORUS_SUCCESS);
  auto after = world[1]->irecv(0, 5, sig_of(2, 100), got_small);
  CHECK(error_code(*world[1], after) == CHORUS_ERR_PEER_FAILURE);
  world[1]->close();
  closer.join();
  close_world(world);
}

TEST_CASE("ucx: many concurrent requests between all ranks") {
  TcpStoreServer server(kToken);
  const int n = 4, per_peer = 30;
  auto world = make_world(server, n, "many/");
  const std::size_t sizes[] = {0, 100, 5000, 40000, 200000};
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        std::vector<std::vector<std::byte>> out, in;
        std::vector<RequestPtr> requests;
        std::vector<std::pair<int, int>> expect;  // (peer, i) per receive
        for (int peer = 0; peer < n; ++peer) {
          if (peer == r) continue;
          for (int i = 0; i < per_peer; ++i) {
            std::size_t len = sizes[(i + peer) % 5];
            in.emplace_back(len);
            expect.emplace_back(peer, i);
            requests.push_back(
                world[r]->irecv(peer, static_cast<uint32_t>(i % 4), sig_of(i, len), in.back()));
          }
        }
        for (int peer = 0; peer < n; ++peer) {
          if (peer == r) continue;
          for (int i = 0; i < per_peer; ++i) {
            out.push_back(pattern(sizes[(i + r) % 5], r * 1000 + i));
            requests.push_back(world[r]->isend(peer, static_cast<uint32_t>(i % 4),
                                               sig_of(i, out.back().size()), out.back()));
          }
        }
        wait_all(*world[r], requests, Deadline::after(std::chrono::seconds(30)), 20, "many");
        for (std::size_t k = 0; k < in.size(); ++k) {
          auto [peer, i] = expect[k];
          if (in[k] != pattern(sizes[(i + peer) % 5], peer * 1000 + i))
            errors[r] += fmt::format("message {} from rank {} differs; ", i, peer);
        }
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(errors[r] == "");
  }
  close_world(world);
}

TEST_CASE("ucx: shared memory is used only where allowed") {
  TcpStoreServer server(kToken);
  SECTION("peers on other hosts: no shared-memory transport") {
    auto world =
        make_world(server, 2, "noshm/", [](UcxOptions& o) { o.allow_shared_memory = false; });
    std::string info = world[0]->endpoint_info(1);
    INFO("UCX_TLS=" << world[0]->transports() << "\n" << info);
    CHECK_FALSE(tls_may_use_shm(world[0]->transports()));
    CHECK(world[0]->peer_error_handling());
    CHECK(info.find("lane[") != std::string::npos);
    CHECK_FALSE(names_shm(info));
    CHECK_FALSE(names_shm(world[1]->endpoint_info(0)));
    auto data = pattern(100000, 5);
    std::vector<std::byte> got(data.size());
    auto r = world[1]->irecv(0, 1, sig_of(1, 1), got);
    auto s = world[0]->isend(1, 1, sig_of(1, 1), data);
    wait(*world[1], r);
    wait(*world[0], s);
    CHECK(got == data);
    close_world(world);
  }
  SECTION("one host: shared memory when UCX_TLS includes it") {
    auto world = make_world(server, 2, "shm/");
    std::string info = world[0]->endpoint_info(1);
    INFO("UCX_TLS=" << world[0]->transports() << "\n" << info);
    bool shm = tls_may_use_shm(world[0]->transports());
    CHECK(world[0]->peer_error_handling() == !shm);
    CHECK(names_shm(info) == shm);
    // UCX_TLS=tcp (the ucx-tcp test): every lane is a TCP one.
    const char* tls = std::getenv("UCX_TLS");
    if (tls && std::string(tls) == "tcp") {
      CHECK_FALSE(shm);
      CHECK(info.find("tcp/") != std::string::npos);
      CHECK(lanes_not_over(info, "tcp/") == 0);
    }
    close_world(world);
  }
}
