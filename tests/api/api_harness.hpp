// Thread ranks of one process, each with its own communicator from
// chorus_init against an in-process store: how the C API tests run a job.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "include/chorus.h"

namespace chorus::test {

inline const char* kToken = "api-test";

// Runs body(rank, comm) on n thread ranks, each with its own communicator
// (transport: chorus_init_config_t::transport, null for the default).
// Returns the per-rank results of the bodies (0 when fine); 1000 when init
// failed, 2000 when the final destroy did.
inline std::vector<int> run(int n, const std::function<int(int, chorus_comm_t)>& body,
                            const char* transport = nullptr) {
  chorus::TcpStoreServer server(kToken);
  const std::string addr = server.address();
  std::vector<int> results(static_cast<std::size_t>(n), -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      chorus_init_config_t config = CHORUS_INIT_CONFIG_INITIALIZER;
      config.rank = r;
      config.world_size = n;
      config.store_addr = addr.c_str();
      config.job_token = kToken;
      config.transport = transport;
      chorus_comm_t comm = nullptr;
      if (chorus_init(&config, &comm) != CHORUS_SUCCESS) {
        results[static_cast<std::size_t>(r)] = 1000;
        return;
      }
      int& result = results[static_cast<std::size_t>(r)];
      result = body(r, comm);
      // Destroy must succeed, also after a failure (it only says goodbye).
      if (chorus_comm_destroy(comm) != CHORUS_SUCCESS && result == 0) result = 2000;
    });
  for (auto& t : threads) t.join();
  return results;
}

// Polls `done` every millisecond until it holds or `limit` passes; returns
// whether it held.
inline bool wait_until(const std::function<bool()>& done,
                       std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Waits (bounded: 60 s) until another thread rank sets `flag`.
inline void wait_for(const std::atomic<bool>& flag) {
  wait_until([&] { return flag.load(); });
}

// Returns once `count` thread ranks have arrived (bounded: 60 s). Outside the
// library: a test uses it where no rank may go on before every rank has
// finished its previous call (a refusal fails calls that peers are still
// finishing, a known gap).
inline void all_arrive(std::atomic<int>& arrived, int count) {
  arrived.fetch_add(1);
  wait_until([&] { return arrived.load() >= count; });
}

// The transports the API tests run over: the default (shared memory between
// these thread ranks), TCP, and UCX where built.
inline std::vector<const char*> transports() {
  std::vector<const char*> out{nullptr, "tcp"};
#ifdef CHORUS_HAVE_UCX
  out.push_back("ucx");
#endif
  return out;
}

inline bool all_zero(const std::vector<int>& v) {
  return std::all_of(v.begin(), v.end(), [](int x) { return x == 0; });
}

}  // namespace chorus::test
