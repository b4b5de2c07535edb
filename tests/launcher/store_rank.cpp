// A rank for the launcher tests: finds its place from the environment the
// way a Chorus program does, meets the other ranks at the store and checks
// what they wrote.
//   store_rank [--hold=MS]   rendezvous, then stay MS milliseconds
//   store_rank --tf          check that TF_CONFIG alone gives this rank
#include <fmt/format.h>

#include <string>
#include <thread>
#include <vector>

#include "base/bootstrap/env.hpp"
#include "base/core/config.hpp"

using namespace chorus;

int main(int argc, char** argv) {
  int hold_ms = 0;
  bool tf = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--tf") tf = true;
    if (a.starts_with("--hold=")) hold_ms = std::stoi(a.substr(7));
  }
  try {
    auto env = process_env();
    if (tf) {
      auto text = env("TF_CONFIG");
      if (!text) {
        fmt::print("no TF_CONFIG\n");
        return 2;
      }
      auto info = detect_bootstrap(map_env({{"TF_CONFIG", *text}}), Config{});
      fmt::print("tf rank {} of {} (CHORUS_RANK {})\n", info.rank, info.world_size,
                 global_config().rank);
      return info.rank == global_config().rank ? 0 : 3;
    }
    auto info = detect_bootstrap(env, global_config());
    auto store = open_store(info, Deadline::after_ms(20000));
    store->add("arrived", 1);  // before the set: whoever sees every key sees every add
    store->set(fmt::format("rank/{}", info.rank), std::to_string(info.rank * 10));
    std::vector<std::string> keys;
    for (int r = 0; r < info.world_size; ++r) keys.push_back(fmt::format("rank/{}", r));
    store->wait(keys, Deadline::after_ms(20000));
    for (int r = 0; r < info.world_size; ++r)
      if (store->get(keys[r], Deadline::after_ms(1000)) != std::to_string(r * 10)) {
        fmt::print(stderr, "store_rank: wrong value for rank {}\n", r);
        return 4;
      }
    if (store->add("arrived", 0) != info.world_size) {
      fmt::print(stderr, "store_rank: not every rank arrived\n");
      return 5;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
    fmt::print("rank {}/{} store {} ok\n", info.rank, info.world_size, info.store_addr);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "store_rank: {}\n", e.what());
    return 1;
  }
}
