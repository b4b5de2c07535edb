// The UCX transport against peers that fail: a rank in a child process
// (tests/ucx/ucx_peer.cpp) killed with SIGKILL, before or inside a call, and
// endpoints that UCX reports lost. Registered with test_ucx_transport.cpp
// (twice: UCX's defaults and UCX_TLS=tcp).
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "base/core/error.hpp"
#include "tests/common/transport_test.hpp"
#include "tests/ucx/ucx_world.hpp"
#include "transports/ucx/ucx_transport.hpp"

extern char** environ;

using namespace chorus;
using namespace chorus::ucx;
using namespace chorus::test;

namespace {

// Starts the ucx_peer helper (built next to this test) as rank 1 of a
// two-rank world under `prefix`, with `extra` arguments; its pid.
pid_t spawn_peer(const TcpStoreServer& server, const std::string& prefix,
                 const std::vector<std::string>& extra = {}) {
  const std::string exe =
      (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "ucx_peer").string();
  REQUIRE(std::filesystem::exists(exe));
  std::vector<std::string> args = {exe, server.address(), kToken, prefix, "1", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t child = -1;
  REQUIRE(posix_spawn(&child, exe.c_str(), nullptr, nullptr, argv.data(), environ) == 0);
  return child;
}

// Rank 0 of that world, in this process; kills the child if set-up fails.
std::unique_ptr<UcxTransport> join_peer(TcpStoreClient& store, const std::string& prefix,
                                        pid_t child) {
  try {
    return std::make_unique<UcxTransport>(store, options_for(0, 2, prefix));
  } catch (...) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    throw;
  }
}

}  // namespace

TEST_CASE("ucx: a peer process killed with SIGKILL is a peer failure naming it") {
  TcpStoreServer server(kToken);
  const pid_t child = spawn_peer(server, "kill/");
  TcpStoreClient store(server.address(), kToken, Deadline::after(std::chrono::seconds(20)));
  auto rank0 = join_peer(store, "kill/", child);
  std::vector<std::byte> got(16);
  auto recv = rank0->irecv(1, 1, sig_of(1, 4), got);
  store.get("kill/ready/1", Deadline::after(std::chrono::seconds(20)));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  std::string message;
  CHECK(error_code(*rank0, recv, &message) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("rank 1 failed"));
  INFO(message);
  CHECK_THROWS_AS(rank0->check_failed(), IoError);
  rank0.reset();
}

TEST_CASE("ucx: a rank that dies spares the calls in progress here: what it sent is taken") {
  // Rank 1 sends its part of call #3 and is killed while rank 0 is still in
  // #3: rank 0 takes that part, and fails at once what #3 still wants from
  // rank 1 that never came, and every later call.
  TcpStoreServer server(kToken);
  const uint32_t tag = (5u << Spared::kSpaceShift) | 1, other_tag = tag + 1;
  const pid_t child = spawn_peer(server, "died/", {std::to_string(tag)});
  TcpStoreClient store(server.address(), kToken, Deadline::after(std::chrono::seconds(20)));
  auto rank0 = join_peer(store, "died/", child);
  rank0->board().slot(tag).enter(sig_of(3, 16));
  std::vector<std::byte> never(16);
  auto posted = rank0->irecv(1, other_tag, sig_of(3, 16), never);  // rank 1 never sends it
  store.get("died/ready/1", Deadline::after(std::chrono::seconds(20)));
  wait_for_arrival(*rank0, 1, tag);  // what this test is about: its part is here
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  std::vector<std::byte> part(16);  // what ucx_peer sends
  for (std::size_t i = 0; i < part.size(); ++i) part[i] = static_cast<std::byte>(i * 7 + 3);
  check_death_spared_call(*rank0, posted, tag, part);
  rank0->board().slot(tag).leave(sig_of(3, 16), false);
  rank0.reset();
}

// What `rank` hands to its control channel, polling it for up to 10 s.
std::vector<std::pair<int, std::string>> wait_for_lost_connections(UcxTransport& rank) {
  std::vector<std::pair<int, std::string>> lost;
  const auto deadline = Deadline::after(std::chrono::seconds(10));
  while (lost.empty() && !deadline.expired()) {
    rank.poll();
    lost = rank.take_lost_connections();
  }
  return lost;
}

// Under a control channel (RoutedTransport), a failed endpoint is not a
// death: the peer may be alive behind a connection the network dropped. UCX
// hands the peer to the control channel and keeps its requests pending until
// the verdict comes back (as a failure, Transport::fail); without a control
// channel the same error is a death, as before.
TEST_CASE("ucx: a failed endpoint is handed to the control channel, not taken for dead") {
  TcpStoreServer server(kToken);
  const uint32_t tag = (3u << Spared::kSpaceShift) | 1;
  std::vector<std::byte> got(16), part(16, std::byte{5});
  SECTION("under a control channel") {
    auto world = make_world(server, 2, "lost-ep/", [](UcxOptions& o) {
      o.control_settles_lost_peers = true;
      o.close_timeout_s = 2;
    });
    auto& rank0 = *world[0];
    auto recv = rank0.irecv(1, tag, sig_of(4, 16), got);
    rank0.simulate_endpoint_error(1, UCS_ERR_ENDPOINT_TIMEOUT);
    const auto lost = wait_for_lost_connections(rank0);
    REQUIRE(lost.size() == 1);
    CHECK(lost[0].first == 1);
    CHECK_THAT(lost[0].second,
               Catch::Contains("Endpoint timeout") && Catch::Contains("from rank 0 to rank 1"));
    CHECK(rank0.take_lost_connections().empty());  // handed over once
    // Nothing decided here: not gone, its receive and a new send wait.
    CHECK_NOTHROW(rank0.check_peer(1, tag, sig_of(4, 16)));
    auto send = rank0.isend(1, tag, sig_of(4, 16), part);
    for (int i = 0; i < 100; ++i) rank0.poll();
    CHECK_FALSE(recv->done());
    CHECK_FALSE(send->done());
    // The control channel's verdict (RoutedTransport passes its failure on).
    rank0.fail(CHORUS_ERR_PEER_FAILURE, "the connection between rank 0 and rank 1 ended (test)",
               Spared{{{3, 3}}});
    std::string message;
    CHECK(error_code(rank0, recv, &message) == CHORUS_ERR_PEER_FAILURE);
    CHECK_THAT(message, Catch::Contains("between rank 0 and rank 1"));
    CHECK(error_code(rank0, send) == CHORUS_ERR_PEER_FAILURE);
    world[1]->fail(CHORUS_ERR_PEER_FAILURE, "the other end (test)", Spared{});
    close_world(world);
  }
  SECTION("a send that UCX ends with the endpoint's error before it reports the endpoint") {
    auto world = make_world(server, 2, "lost-send/", [](UcxOptions& o) {
      o.control_settles_lost_peers = true;
      o.close_timeout_s = 2;
    });
    auto& rank0 = *world[0];
    rank0.simulate_send_error(1, UCS_ERR_ENDPOINT_TIMEOUT);
    auto send = rank0.isend(1, tag, sig_of(4, 16), part);
    const auto lost = wait_for_lost_connections(rank0);
    REQUIRE(lost.size() == 1);
    CHECK(lost[0].first == 1);
    CHECK_THAT(lost[0].second, Catch::Contains("Endpoint timeout") &&
                                   Catch::Contains("on a send between rank 0 and rank 1"));
    CHECK_FALSE(send->done());  // not failed on a guess: it waits for the verdict
    rank0.fail(CHORUS_ERR_PEER_FAILURE, "the connection between rank 0 and rank 1 ended (test)",
               Spared{{{3, 3}}});
    CHECK(error_code(rank0, send) == CHORUS_ERR_PEER_FAILURE);
    world[1]->fail(CHORUS_ERR_PEER_FAILURE, "the other end (test)", Spared{});
    close_world(world);
  }
  SECTION("alone: a death") {
    auto world = make_world(server, 2, "dead-ep/", [](UcxOptions& o) { o.close_timeout_s = 2; });
    auto& rank0 = *world[0];
    auto recv = rank0.irecv(1, tag, sig_of(4, 16), got);
    rank0.simulate_endpoint_error(1, UCS_ERR_ENDPOINT_TIMEOUT);
    std::string message;
    CHECK(error_code(rank0, recv, &message) == CHORUS_ERR_PEER_FAILURE);
    CHECK_THAT(message, Catch::Contains("rank 1 failed") && Catch::Contains("Endpoint timeout"));
    CHECK(rank0.take_lost_connections().empty());
    world[1]->fail(CHORUS_ERR_PEER_FAILURE, "the other end (test)", Spared{});
    close_world(world);
  }
}
