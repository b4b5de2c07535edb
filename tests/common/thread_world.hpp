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

// What a test world's rank `rank` of `size` is built with under the store
// keys `prefix`: the job's token, 20 s to connect and 10 s to close.
template <typename Options>
Options thread_world_options(int rank, int size, const std::string& token,
                             const std::string& prefix) {
  Options o;
  o.rank = rank;
  o.size = size;
  o.token = token;
  o.key_prefix = prefix;
  o.connect_timeout_s = 20;
  o.close_timeout_s = 10;
  return o;
}

// make_thread_world with those options, each first passed to `adjust` when
// one is given.
template <typename Transport, typename Options>
std::vector<std::unique_ptr<Transport>> make_thread_world(
    TcpStoreServer& server, int size, const std::string& token, const std::string& prefix,
    const std::function<void(Options&)>& adjust) {
  return make_thread_world<Transport, Options>(server, size, token, [&](int rank) {
    Options o = thread_world_options<Options>(rank, size, token, prefix);
    if (adjust) adjust(o);
    return o;
  });
}

}  // namespace chorus::test
