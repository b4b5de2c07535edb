// TCP store: semantics across threads and clients, timeouts that name keys,
// authentication, and a server that survives hostile input.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

#include "base/bootstrap/net.hpp"
#include "base/bootstrap/store_wire.hpp"
#include "base/bootstrap/tcp_store.hpp"
#include "base/core/error.hpp"
#include "tests/common/log_capture.hpp"

using namespace chorus;
namespace wire = chorus::bootstrap::wire;

namespace {

Deadline soon(int ms = 10000) {
  return Deadline::after_ms(ms);
}

std::unique_ptr<TcpStoreClient> client(const TcpStoreServer& s, const std::string& token = "tok") {
  return std::make_unique<TcpStoreClient>(s.address(), token, soon());
}

// A raw socket to the server, for speaking broken protocol.
bootstrap::UniqueFd raw_connect(const TcpStoreServer& s) {
  return bootstrap::connect_with_retry(s.address(), soon());
}

// True when the server closes the socket (recv sees EOF or a reset) in time.
bool closed_by_server(int fd) {
  char buf[256];
  auto deadline = soon(5000);
  while (!deadline.expired()) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, deadline.poll_timeout_ms()) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

void send_bytes(int fd, const std::string& bytes) {
  REQUIRE(bootstrap::write_all(fd, bytes, soon()) == 0);
}

void check_server_still_works(const TcpStoreServer& s) {
  auto c = client(s);
  c->set("alive", "yes");
  CHECK(c->get("alive", soon()) == "yes");
}

}  // namespace

TEST_CASE("tcp store: set, get, wait and add", "[tcp_store]") {
  TcpStoreServer server("tok");
  CHECK(server.port() != 0);
  CHECK(server.address() == fmt::format("127.0.0.1:{}", server.port()));
  auto c = client(server);
  c->set("a", "1");
  CHECK(c->get("a", soon()) == "1");
  c->set("a", "2");  // overwrite
  CHECK(c->get("a", soon()) == "2");
  std::string binary("x\0y\xff", 4);
  c->set("bin", binary);
  CHECK(c->get("bin", soon()) == binary);
  std::string big(3 << 20, 'q');
  big[12345] = 'z';
  c->set("big", big);
  CHECK(c->get("big", soon()) == big);
  CHECK(c->add("n", 5) == 5);
  CHECK(c->add("n", -7) == -2);
  CHECK(c->get("n", soon()) == "-2");
  c->wait({"a", "bin", "n"}, soon());
  c->wait({}, soon());
  c->set("text", "abc");
  CHECK_THROWS_AS(c->add("text", 1), UsageError);
}

TEST_CASE("tcp store: get and wait block until another client sets", "[tcp_store]") {
  TcpStoreServer server("tok");
  auto getter = client(server);
  auto setter = client(server);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    setter->set("late", "value");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    setter->set("later", "v2");
  });
  CHECK(getter->get("late", soon()) == "value");
  getter->wait({"late", "later"}, soon());
  t.join();
}

TEST_CASE("tcp store: one client shared by threads does not deadlock", "[tcp_store]") {
  TcpStoreServer server("tok");
  auto c = client(server);
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  // Each thread waits for the key of the next one, which that thread sets
  // only after starting its own wait: a client that held the socket during
  // a blocking get would deadlock here.
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      std::thread setter([&, i] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20 * i));
        c->set(fmt::format("k{}", i), std::to_string(i));
      });
      if (c->get(fmt::format("k{}", (i + 1) % kThreads), soon()) ==
          std::to_string((i + 1) % kThreads))
        ++ok;
      setter.join();
    });
  for (auto& t : threads) t.join();
  CHECK(ok == kThreads);
}

TEST_CASE("tcp store: many clients rendezvous and count", "[tcp_store]") {
  TcpStoreServer server("tok");
  constexpr int kClients = 32;
  constexpr int kAdds = 50;
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      try {
        auto c = client(server);
        c->set(fmt::format("rank/{}", i), std::to_string(i * i));
        for (int j = 0; j < kAdds; ++j) c->add("counter", 1);
        std::vector<std::string> keys;
        for (int k = 0; k < kClients; ++k) keys.push_back(fmt::format("rank/{}", k));
        c->wait(keys, soon(30000));
        for (int k = 0; k < kClients; ++k)
          if (c->get(keys[k], soon()) != std::to_string(k * k)) ++errors;
      } catch (const std::exception& e) {
        UNSCOPED_INFO(e.what());
        ++errors;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(errors == 0);
  auto c = client(server);
  CHECK(c->add("counter", 0) == kClients * kAdds);
}

TEST_CASE("tcp store: timeouts name the keys", "[tcp_store]") {
  TcpStoreServer server("tok");
  auto c = client(server);
  c->set("present", "1");
  try {
    c->get("missing-key", Deadline::after_ms(200));
    FAIL("get did not time out");
  } catch (const IoError& e) {
    CHECK(e.code() == CHORUS_ERR_TIMEOUT);
    CHECK_THAT(e.what(), Catch::Contains("missing-key"));
  }
  try {
    c->wait({"present", "absent-1", "absent-2"}, Deadline::after_ms(200));
    FAIL("wait did not time out");
  } catch (const IoError& e) {
    CHECK(e.code() == CHORUS_ERR_TIMEOUT);
    CHECK_THAT(e.what(), Catch::Contains("absent-1") && Catch::Contains("absent-2"));
    CHECK_THAT(e.what(), !Catch::Contains("present"));
  }
  // The connection is still usable; a late set satisfies nothing stale.
  c->set("missing-key", "now");
  CHECK(c->get("missing-key", soon()) == "now");
}

TEST_CASE("tcp store: a wrong token is refused, a good client still works", "[tcp_store]") {
  TcpStoreServer server("right-token");
  auto good = client(server, "right-token");
  try {
    TcpStoreClient bad(server.address(), "wrong-token", soon());
    FAIL("wrong token accepted");
  } catch (const IoError& e) {
    CHECK(e.code() == CHORUS_ERR_BOOTSTRAP);
    CHECK_THAT(e.what(), Catch::Contains(server.address()));
  }
  CHECK(server.connections_refused() == 1);
  good->set("k", "v");
  CHECK(good->get("k", soon()) == "v");
  // An empty token on the server disables the check.
  TcpStoreServer open("");
  auto any = client(open, "whatever");
  any->set("k", "v");
}

TEST_CASE("tcp store: malformed input is dropped, the server keeps serving", "[tcp_store]") {
  TcpStoreServer server("tok");
  auto good = client(server);
  auto auth = wire::encode_frame(wire::Op::kAuth, 1, {}, "tok");
  int64_t expected_refusals = 1;  // each section's hostile client, once dropped

  SECTION("bad magic") {
    auto fd = raw_connect(server);
    send_bytes(fd.get(), std::string(wire::kHeaderSize, 'G'));
    CHECK(closed_by_server(fd.get()));
  }
  SECTION("oversized value length after authenticating") {
    auto fd = raw_connect(server);
    std::string frame = wire::encode_frame(wire::Op::kSet, 2, "k", "v");
    uint32_t huge = 0xF0000000u;  // far above the 64 MiB bound
    std::memcpy(frame.data() + 16, &huge, 4);
    send_bytes(fd.get(), auth + frame.substr(0, wire::kHeaderSize));
    CHECK(closed_by_server(fd.get()));
  }
  SECTION("oversized key length") {
    auto fd = raw_connect(server);
    std::string frame = wire::encode_frame(wire::Op::kGet, 2, "k", "");
    uint32_t huge = wire::kMaxKeyBytes + 1;
    std::memcpy(frame.data() + 12, &huge, 4);
    send_bytes(fd.get(), auth + frame);
    CHECK(closed_by_server(fd.get()));
  }
  SECTION("request before authentication") {
    auto fd = raw_connect(server);
    send_bytes(fd.get(), wire::encode_frame(wire::Op::kSet, 1, "evil", "x"));
    CHECK(closed_by_server(fd.get()));
    CHECK_THROWS_AS(good->get("evil", Deadline::after_ms(100)), IoError);
  }
  SECTION("malformed key list") {
    auto fd = raw_connect(server);
    send_bytes(fd.get(),
               auth + wire::encode_frame(wire::Op::kWait, 2, {}, std::string("\x05\0\0\0abc", 7)));
    CHECK(closed_by_server(fd.get()));
  }
  SECTION("half a header, then gone") {
    auto fd = raw_connect(server);
    send_bytes(fd.get(), auth.substr(0, 10));
    expected_refusals = 0;  // a client that leaves was not refused
  }
  CHECK(server.connections_refused() == expected_refusals);
  good->set("after", "ok");
  CHECK(good->get("after", soon()) == "ok");
  check_server_still_works(server);
}

namespace {

// A port of 127.0.0.1 held by a bound socket that does not listen: connects
// to it are refused, and no other program can take it meanwhile; a store
// server may still bind it (both sockets set SO_REUSEADDR and only one
// listens). Tests that need "nothing listens here" never free a port and
// hope nobody takes it before they use it again.
struct ReservedPort {
  ReservedPort() : fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd.valid());
    int one = 1;
    REQUIRE(setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    socklen_t len = sizeof sa;
    REQUIRE(getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) == 0);
    port = ntohs(sa.sin_port);
  }
  bootstrap::UniqueFd fd;
  uint16_t port = 0;
};

}  // namespace

TEST_CASE("tcp store: connect retries until the server starts", "[tcp_store]") {
  ReservedPort reserved;  // refuses connections until the server binds it too
  std::string addr = fmt::format("127.0.0.1:{}", reserved.port);
  test::LogCapture log("bootstrap");
  std::unique_ptr<TcpStoreServer> server;
  std::atomic<bool> connecting{false};
  std::thread starter([&] {
    while (!connecting) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // The client's first attempts meet the reserved port; its retries find the server.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    server = std::make_unique<TcpStoreServer>("tok", "127.0.0.1", reserved.port);
  });
  connecting = true;
  auto c = connect_tcp_store(addr, "tok", soon());
  starter.join();
  c->set("k", "v");
  CHECK(c->get("k", soon()) == "v");
  c.reset();
  // "connected to store at ADDR after N attempt(s)": refused at least once.
  auto lines = log.matching("connected to store at " + addr);
  REQUIRE(lines.size() == 1);
  INFO(lines[0]);
  CHECK_THAT(lines[0], !Catch::Contains("after 1 attempt"));
}

TEST_CASE("tcp store: connect gives up at the deadline naming the address", "[tcp_store]") {
  ReservedPort reserved;
  std::string addr = fmt::format("127.0.0.1:{}", reserved.port);
  try {
    connect_tcp_store(addr, "tok", Deadline::after_ms(300));
    FAIL("connected to nothing");
  } catch (const IoError& e) {
    CHECK(e.code() == CHORUS_ERR_BOOTSTRAP);
    CHECK_THAT(e.what(), Catch::Contains(addr));
  }
  CHECK_THROWS_AS(connect_tcp_store("no-port-here", "tok", soon()), UsageError);
}

TEST_CASE("tcp store: a vanished server fails operations instead of hanging", "[tcp_store]") {
  auto server = std::make_unique<TcpStoreServer>("tok");
  auto c = client(*server);
  c->set("k", "v");
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server.reset();
  });
  try {
    c->get("never", soon(20000));
    FAIL("get survived the server");
  } catch (const IoError& e) {
    CHECK(e.code() == CHORUS_ERR_BOOTSTRAP);
    CHECK_THAT(e.what(), Catch::Contains("lost connection"));
  }
  t.join();
  CHECK_THROWS_AS(c->set("k", "v"), IoError);
}

TEST_CASE("tcp store: local addresses", "[tcp_store]") {
  TcpStoreServer server("tok");
  auto c = client(server);
  CHECK(c->local_address() == "127.0.0.1");
  CHECK(local_address_towards(server.address()) == "127.0.0.1");
  CHECK_THROWS_AS(local_address_towards("bad address"), UsageError);
}

TEST_CASE("store wire: header validation", "[tcp_store]") {
  std::string frame = wire::encode_frame(wire::Op::kSet, 7, "key", "value", 42);
  wire::Header h;
  REQUIRE_FALSE(wire::decode_header(frame.data(), &h));
  CHECK(h.op == wire::Op::kSet);
  CHECK(h.id == 7);
  CHECK(h.key_len == 3);
  CHECK(h.value_len == 5);
  CHECK(h.arg == 42);
  std::string bad = frame;
  bad[6] = 99;  // unknown op
  CHECK(wire::decode_header(bad.data(), &h));
  bad = frame;
  bad[4] = 2;  // version
  CHECK(wire::decode_header(bad.data(), &h));
  std::vector<std::string> keys;
  CHECK(wire::decode_key_list(wire::encode_key_list({"a", "", "ccc"}), &keys));
  CHECK(keys == std::vector<std::string>{"a", "", "ccc"});
  CHECK_FALSE(wire::decode_key_list(std::string("\xff\xff\xff\x7f", 4), &keys));
  CHECK_FALSE(wire::decode_key_list("", &keys));
}
