#include "lib/strategy/ps/sharding.hpp"

#include <algorithm>
#include <numeric>

#include "base/core/error.hpp"

namespace chorus::strategy::ps {

std::vector<int> assign_shards(const std::vector<std::size_t>& bytes, int servers) {
  CHORUS_CHECK(servers > 0, "assign_shards: {} servers", servers);
  std::vector<std::size_t> order(bytes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // Largest first; equal sizes in registration order, so every rank agrees.
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return bytes[a] > bytes[b]; });
  std::vector<std::size_t> load(static_cast<std::size_t>(servers), 0);
  std::vector<int> shard_of(bytes.size(), 0);
  for (std::size_t v : order) {
    auto least = std::min_element(load.begin(), load.end());  // first of equals: lowest index
    shard_of[v] = static_cast<int>(least - load.begin());
    *least += bytes[v];
  }
  return shard_of;
}

}  // namespace chorus::strategy::ps
