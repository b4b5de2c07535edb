#include "collectives/tuner/cost_model.hpp"

#include <algorithm>

namespace chorus {

CostModel CostModel::defaults(int ranks_on_host, int cores) {
  CostModel m;
  if (cores > 0 && ranks_on_host > cores) {
    const double crowding = static_cast<double>(ranks_on_host) / cores;
    m.alpha_us = 20.0 * crowding;
    m.shm_alpha_us = 2.0 * crowding;
    m.oversubscribed = true;
  }
  return m;
}

std::size_t ring_segment_bytes(std::size_t bytes, int ranks, const CostModel& model,
                               std::size_t configured) {
  constexpr std::size_t kMin = 256 << 10, kMax = 1 << 20;
  if (configured != 0) return configured;
  if (model.oversubscribed) return kMax;
  const std::size_t chunk = bytes / static_cast<std::size_t>(std::max(ranks, 1));
  return std::clamp<std::size_t>(chunk / 16, kMin, kMax);
}

int log2_ceil(int n) {
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  return rounds;
}

}  // namespace chorus
