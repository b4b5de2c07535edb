// The TCP transport's test worlds: real ranks on threads of one process,
// through a real store and loopback sockets, and a hand-driven rank 1.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "tests/common/thread_world.hpp"
#include "tests/common/transport_test.hpp"
#include "transports/tcp/socket.hpp"
#include "transports/tcp/tcp_transport.hpp"
#include "transports/tcp/wire.hpp"

namespace chorus::test {

using namespace chorus::tcp;

inline const std::string kToken = "test-token";

inline TcpOptions options_for(int rank, int size, const std::string& prefix) {
  return thread_world_options<TcpOptions>(rank, size, kToken, prefix);
}

// Builds `size` connected transports on threads (set-up is collective).
inline std::vector<std::unique_ptr<TcpTransport>> make_world(
    TcpStoreServer& server, int size, const std::string& prefix,
    const std::function<void(TcpOptions&)>& adjust = {}) {
  return make_thread_world<TcpTransport, TcpOptions>(server, size, kToken, prefix, adjust);
}

// Closing is collective (every rank waits for its peers' goodbyes), as it is
// between processes: close all ranks at once.
inline void close_world(std::vector<std::unique_ptr<TcpTransport>>& world) {
  std::vector<std::thread> threads;
  for (auto& t : world) threads.emplace_back([&t] { t->close(); });
  for (auto& t : threads) t.join();
}

// A port on 127.0.0.1 that nothing listens on: the address of a dead rank.
inline std::string closed_address() {
  uint16_t port = 0;
  { Fd listener = listen_on("127.0.0.1", &port); }
  return bootstrap::format_host_port("127.0.0.1", port);
}

// Connects to rank 0 of a two-rank world pretending to be rank 1, after
// publishing `listener` as its own address (by default one where nothing
// listens: rank 0 finds it dead when it probes it).
inline Fd fake_rank1(TcpStoreServer& server, const std::string& prefix, const std::string& token,
                     const std::string& listener = closed_address(),
                     uint16_t purpose = static_cast<uint16_t>(HelloPurpose::connect)) {
  TcpStoreClient store(server.address(), kToken, Deadline::after(std::chrono::seconds(10)));
  store.set(prefix + "addr/1", listener);
  auto addr = store.get(prefix + "addr/0", Deadline::after(std::chrono::seconds(10)));
  Fd fd = bootstrap::connect_with_retry(addr, Deadline::after(std::chrono::seconds(10)));
  auto hello = make_hello(token, 1, 0, 2);
  hello.purpose = purpose;
  write_all(fd.get(), bytes_of(hello), Deadline::after(std::chrono::seconds(10)));
  return fd;
}

// A real rank 0 and a hand-driven rank 1 (a socket past the hello) of a
// 2-rank world, for feeding rank 0 what no real rank would send.
struct WithFakeRank1 {
  explicit WithFakeRank1(const std::string& prefix,
                         const std::function<void(TcpOptions&)>& adjust = {},
                         const std::string& rank1_listener = closed_address())
      : store(server.address(), kToken, Deadline::after(std::chrono::seconds(10))) {
    TcpOptions options = options_for(0, 2, prefix);
    if (adjust) adjust(options);
    std::thread t([&] { rank0 = std::make_unique<TcpTransport>(store, options); });
    fd = fake_rank1(server, prefix, kToken, rank1_listener);
    HelloAck ack{};
    read_exact(fd.get(), writable_bytes_of(ack), Deadline::after(std::chrono::seconds(10)));
    t.join();
  }
  TcpStoreServer server{kToken};
  TcpStoreClient store;
  std::unique_ptr<TcpTransport> rank0;
  Fd fd;
};

}  // namespace chorus::test
