#include "collectives/barrier/shm.hpp"

#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include "collectives/common/shm_pipeline.hpp"

namespace chorus {

void shm_barrier(CollectiveContext& ctx) {
  shm::Domain& domain = *ctx.shm;
  domain.announce(ctx.sig);
  const uint64_t call = domain.take_barrier();
  domain.publish(shm::Counter::arrived, call + 1);
  domain.wait_all(shm::Counter::arrived, call + 1, shm_wait_spec(ctx));
  domain.check_announcements(ctx.sig);
}

double shm_barrier_estimate(const CostModel& m, const Team&, std::size_t) {
  return m.shm_alpha_us;
}

extern const AlgorithmSpec shm_barrier_spec{
    CollectiveKind::barrier,
    "shm",
    "one counter per rank in shared memory; wait for all of them",
    needs_shared_memory,
    shm_barrier_estimate,
    [](CollectiveContext& ctx, const CollectiveCall&, const CallShape&) { shm_barrier(ctx); },
    /*one_verdict=*/true};

}  // namespace chorus
