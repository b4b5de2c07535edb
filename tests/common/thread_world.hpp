// A world of real transports on threads of one process, connected through a
// real store (set-up is collective, so every rank starts on its own thread).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "base/core/deadline.hpp"

namespace chorus::test {

// `options_of(rank)`: the options each rank's transport is built with.
template <typename Transport, typename Options>
std::vector<std::unique_ptr<Transport>> make_thread_world(
    TcpStoreServer& server, int size, const std::string& token,
    const std::function<Options(int rank)>& options_of) {
  std::vector<std::unique_ptr<Transport>> world(size);
  std::vector<std::unique_ptr<TcpStoreClient>> stores(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      stores[r] = std::make_unique<TcpStoreClient>(server.address(), token,
                                                   Deadline::after(std::chrono::seconds(20)));
      world[r] = std::make_unique<Transport>(*stores[r], options_of(r));
    });
  for (auto& t : threads) t.join();
  return world;
}

}  // namespace chorus::test
