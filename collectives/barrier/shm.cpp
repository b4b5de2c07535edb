#include "collectives/barrier/shm.hpp"

#include "collectives/common/shm_pipeline.hpp"

namespace chorus {

void shm_barrier(CollectiveContext& ctx) {
  shm::Domain& domain = *ctx.shm;
  domain.announce(ctx.sig);
  const uint64_t call = domain.take_small_call();
  domain.publish(shm::Counter::small, call + 1);
  domain.wait_all(shm::Counter::small, call + 1, shm_wait_spec(ctx));
  domain.check_announcements(ctx.sig);
}

}  // namespace chorus
