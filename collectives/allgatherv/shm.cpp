// Shared-memory allgatherv: every rank stages its own-sized block; every rank
// copies all blocks out (gather/shm.hpp's plan with every rank gathering).
#include "collectives/gather/shm.hpp"
#include "collectives/call.hpp"
#include "collectives/common/shm_pipeline.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {
namespace {

void shm_allgatherv(CollectiveContext& ctx, const CollectiveCall& c, const CallShape& shape) {
  const int n = ctx.shm->size();
  std::vector<patterns::Range> blocks(static_cast<std::size_t>(n));
  std::size_t at = 0;
  for (int j = 0; j < n; ++j) {
    blocks[static_cast<std::size_t>(j)] = {at, c.counts[j] * shape.elem};
    at += c.counts[j] * shape.elem;
  }
  shm_gather_blocks(ctx, c.send, c.recv, std::move(blocks), true);
}

double shm_allgatherv_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  return shm_estimate_us(m, team, bytes, 0.0);
}

}  // namespace

extern const AlgorithmSpec shm_allgatherv_spec{
    CollectiveKind::allgatherv,
    "shm",
    "each rank stages its own-sized block once; every rank copies them out",
    needs_shared_memory,
    shm_allgatherv_estimate,
    shm_allgatherv,
    /*one_verdict=*/true};

}  // namespace chorus
