#include "collectives/tuner/cost_model.hpp"

#include <algorithm>
#include <cmath>

namespace chorus {

namespace {

double crowding(int running, int cores) {
  return cores > 0 && running > cores ? static_cast<double>(running) / cores : 1.0;
}

// A step's latency with `crowd` ranks per core: when ranks outnumber the
// cores each step waits for a rank that had to be scheduled.
double alpha_for(double crowd) {
  return crowd > 1 ? 20.0 * crowd : CostModel::kAlphaUs;
}
double shm_alpha_for(double crowd) {
  return crowd > 1 ? 2.0 * crowd : CostModel::kShmAlphaUs;
}

}  // namespace

CostModel CostModel::defaults(int ranks_on_host, int cores) {
  CostModel m;
  m.ranks_on_host = ranks_on_host;
  m.cores = cores;
  const double crowd = crowding(ranks_on_host, cores);
  m.alpha_us = alpha_for(crowd);
  m.shm_alpha_us = shm_alpha_for(crowd);
  m.oversubscribed = cores > 0 && ranks_on_host > cores;
  return m;
}

CostModel CostModel::with_running_share(double share) const {
  CostModel m = *this;
  if (!oversubscribed) return m;
  const int running = std::max(1, static_cast<int>(std::lround(share * ranks_on_host)));
  const double all = crowding(ranks_on_host, cores), some = crowding(running, cores);
  // Scaled, not replaced, so that measured or configured costs (chorus-sim's
  // links) keep their proportions. The rates are those of every rank
  // running (the ring of 3 ranks on 2 cores moves its bytes at them); fewer
  // ranks get more of a core each.
  m.alpha_us *= alpha_for(some) / alpha_for(all);
  m.shm_alpha_us *= shm_alpha_for(some) / shm_alpha_for(all);
  m.us_per_byte *= some / all;
  m.reduce_us_per_byte *= some / all;
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
