// chorus_init_with_store: communicators built over a store the caller supplies
// through callbacks (as PyTorch's backend hands over each process group's
// c10d::Store), here an in-memory store shared by thread ranks.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "include/chorus.h"

namespace {

// The caller's store: a map behind a mutex, wait on a condition variable.
struct MemoryStore {
  std::mutex mu;
  std::condition_variable changed;
  std::map<std::string, std::string> values;
  std::atomic<int> releases{0};
  bool fail_sets = false;  // every set fails, saying so through last_error
};

chorus_result_t store_set(void* context, const char* key, const void* value, size_t length) {
  auto* store = static_cast<MemoryStore*>(context);
  std::lock_guard lock(store->mu);
  if (store->fail_sets) return CHORUS_ERR_IO;
  store->values[key].assign(static_cast<const char*>(value), length);
  store->changed.notify_all();
  return CHORUS_SUCCESS;
}

chorus_result_t store_wait(void* context, const char* const* keys, size_t count,
                           int64_t timeout_ms) {
  auto* store = static_cast<MemoryStore*>(context);
  std::unique_lock lock(store->mu);
  const bool all_there = store->changed.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    for (size_t i = 0; i < count; ++i)
      if (!store->values.contains(keys[i])) return false;
    return true;
  });
  return all_there ? CHORUS_SUCCESS : CHORUS_ERR_TIMEOUT;
}

chorus_result_t store_get(void* context, const char* key,
                          void (*deliver)(void* sink, const void* value, size_t length),
                          void* sink) {
  auto* store = static_cast<MemoryStore*>(context);
  std::lock_guard lock(store->mu);
  auto it = store->values.find(key);
  if (it == store->values.end()) return CHORUS_ERR_BOOTSTRAP;
  deliver(sink, it->second.data(), it->second.size());
  return CHORUS_SUCCESS;
}

chorus_result_t store_add(void* context, const char* key, int64_t delta, int64_t* result) {
  auto* store = static_cast<MemoryStore*>(context);
  std::lock_guard lock(store->mu);
  auto& value = store->values[key];
  *result = (value.empty() ? 0 : std::stoll(value)) + delta;
  value = std::to_string(*result);
  store->changed.notify_all();
  return CHORUS_SUCCESS;
}

const char* store_last_error(void*) {
  return "the memory store refuses every set";
}

void store_release(void* context) {
  static_cast<MemoryStore*>(context)->releases.fetch_add(1);
}

chorus_store_ops_t ops_for(MemoryStore& store) {
  chorus_store_ops_t ops{};
  ops.size = sizeof ops;
  ops.context = &store;
  ops.set = store_set;
  ops.wait = store_wait;
  ops.get = store_get;
  ops.add = store_add;
  ops.last_error = store_last_error;
  ops.release = store_release;
  return ops;
}

chorus_comm_t init_over(MemoryStore& store, int rank, int size, const char* transport,
                        chorus_result_t* result) {
  chorus_init_config_t config = CHORUS_INIT_CONFIG_INITIALIZER;
  config.rank = rank;
  config.world_size = size;
  // A token per store: two groups' communicators on one host keep their
  // shared-memory segments apart (as the torch backend's token per group).
  const std::string token = "store-api-test-" + std::to_string(reinterpret_cast<uintptr_t>(&store));
  config.job_token = token.c_str();
  config.transport = transport;
  chorus_store_ops_t ops = ops_for(store);
  chorus_comm_t comm = nullptr;
  *result = chorus_init_with_store(&config, &ops, &comm);
  return comm;
}

// Every rank's allreduce (sum) of rank + 1 over count floats; 0 when right.
int check_allreduce(chorus_comm_t comm, int rank, int size) {
  std::vector<float> data(1000, static_cast<float>(rank + 1));
  if (chorus_allreduce(comm, data.data(), data.data(), data.size(), CHORUS_FLOAT32, CHORUS_SUM,
                       0) != CHORUS_SUCCESS)
    return 1;
  const float expected = static_cast<float>(size * (size + 1) / 2);
  for (float v : data)
    if (v != expected) return 2;
  return 0;
}

}  // namespace

TEST_CASE("init_with_store: allreduce over a caller's store on 2 and 3 ranks, tcp and shm",
          "[api][store]") {
  for (const char* transport : {"tcp", "shm"})
    for (int n : {2, 3}) {
      INFO("transport " << transport << ", " << n << " ranks");
      MemoryStore store;
      std::vector<int> results(static_cast<size_t>(n), -1);
      std::vector<std::string> errors(static_cast<size_t>(n));
      std::vector<std::thread> threads;
      for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
          chorus_result_t init = CHORUS_SUCCESS;
          chorus_comm_t comm = init_over(store, r, n, transport, &init);
          if (init != CHORUS_SUCCESS) {
            errors[static_cast<size_t>(r)] = chorus_comm_last_error(nullptr);
            results[static_cast<size_t>(r)] = 1000;
            return;
          }
          results[static_cast<size_t>(r)] = check_allreduce(comm, r, n);
          if (chorus_comm_destroy(comm) != CHORUS_SUCCESS) results[static_cast<size_t>(r)] = 2000;
        });
      for (auto& t : threads) t.join();
      for (int r = 0; r < n; ++r) {
        INFO("rank " << r << ": " << errors[static_cast<size_t>(r)]);
        CHECK(results[static_cast<size_t>(r)] == 0);
      }
      // Each rank's communicator held the store once and let it go once.
      CHECK(store.releases.load() == n);
    }
}

TEST_CASE("init_with_store: a subgroup over a store of its own, as torch's new_group",
          "[api][store]") {
  // Ranks 0 and 2 of 3 meet in a second store (a second process group) with
  // no call on the world communicator in between.
  MemoryStore world_store, group_store;
  std::vector<int> results(3, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      chorus_result_t init = CHORUS_SUCCESS;
      chorus_comm_t world = init_over(world_store, r, 3, "tcp", &init);
      if (init != CHORUS_SUCCESS) {
        results[static_cast<size_t>(r)] = 1000;
        return;
      }
      int result = 0;
      if (r != 1) {
        chorus_comm_t group = init_over(group_store, r == 0 ? 0 : 1, 2, "tcp", &init);
        result = init != CHORUS_SUCCESS ? 1000 : check_allreduce(group, r == 0 ? 0 : 1, 2);
        if (group && chorus_comm_destroy(group) != CHORUS_SUCCESS) result = 2000;
      }
      if (result == 0) result = check_allreduce(world, r, 3);
      if (chorus_comm_destroy(world) != CHORUS_SUCCESS && result == 0) result = 2000;
      results[static_cast<size_t>(r)] = result;
    });
  for (auto& t : threads) t.join();
  CHECK(results == std::vector<int>{0, 0, 0});
  CHECK(world_store.releases.load() == 3);
  CHECK(group_store.releases.load() == 2);
}

TEST_CASE("init_with_store: refusals release the store and say why", "[api][store]") {
  SECTION("a missing callback") {
    MemoryStore store;
    chorus_store_ops_t ops = ops_for(store);
    ops.add = nullptr;
    chorus_init_config_t config = CHORUS_INIT_CONFIG_INITIALIZER;
    config.rank = 0;
    config.world_size = 1;
    chorus_comm_t comm = nullptr;
    CHECK(chorus_init_with_store(&config, &ops, &comm) == CHORUS_ERR_INVALID_ARGUMENT);
    CHECK(comm == nullptr);
    CHECK(std::string(chorus_comm_last_error(nullptr)).find("add is missing") != std::string::npos);
    CHECK(store.releases.load() == 1);
  }
  SECTION("a bad rank") {
    MemoryStore store;
    chorus_result_t init = CHORUS_SUCCESS;
    chorus_comm_t comm = init_over(store, 2, 2, "tcp", &init);
    CHECK(init == CHORUS_ERR_INVALID_ARGUMENT);
    CHECK(comm == nullptr);
    CHECK(store.releases.load() == 1);
  }
  SECTION("a store that fails: its own words in the error") {
    MemoryStore store;
    store.fail_sets = true;
    chorus_result_t init = CHORUS_SUCCESS;
    chorus_comm_t comm = init_over(store, 0, 2, "tcp", &init);
    CHECK(init == CHORUS_ERR_BOOTSTRAP);
    CHECK(comm == nullptr);
    const std::string error = chorus_comm_last_error(nullptr);
    INFO(error);
    CHECK(error.find("the memory store refuses every set") != std::string::npos);
    CHECK(store.releases.load() == 1);
  }
}
