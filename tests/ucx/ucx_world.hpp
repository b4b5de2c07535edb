// The UCX transport's test worlds: real ranks on threads of one process,
// through a real store (test_ucx_transport.cpp, test_ucx_peers.cpp).
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "tests/common/thread_world.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace chorus::test {

using namespace chorus::ucx;

inline const std::string kToken = "test-token";

inline UcxOptions options_for(int rank, int size, const std::string& prefix) {
  return thread_world_options<UcxOptions>(rank, size, kToken, prefix);
}

using World = std::vector<std::unique_ptr<UcxTransport>>;

// Builds `size` connected transports on threads (set-up is collective).
inline World make_world(TcpStoreServer& server, int size, const std::string& prefix,
                        const std::function<void(UcxOptions&)>& tweak = {}) {
  return make_thread_world<UcxTransport, UcxOptions>(server, size, kToken, prefix, tweak);
}

// Closing is collective (every rank waits for its peers' goodbyes).
inline void close_world(World& world) {
  std::vector<std::thread> threads;
  for (auto& t : world) threads.emplace_back([&t] { t.reset(); });
  for (auto& t : threads) t.join();
}

// Returns once a message from `peer` with `tag` has arrived at `t` without a
// receive to take it (bounded: fails the test after 10 s).
inline void wait_for_arrival(UcxTransport& t, int peer, uint32_t tag) {
  auto deadline = Deadline::after(std::chrono::seconds(10));
  while (!t.has_unmatched_arrival(peer, tag)) {
    REQUIRE_FALSE(deadline.expired());
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace chorus::test
