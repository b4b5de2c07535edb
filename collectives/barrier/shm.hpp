// Shared-memory barrier for ranks of one host: each rank publishes its
// arrival (the domain's small-call counter) and waits until every rank's
// counter has reached it. One cache line written per rank, n read; no
// system call unless a rank sleeps.
#pragma once

#include "collectives/context.hpp"

namespace chorus {

void shm_barrier(CollectiveContext& ctx);

}  // namespace chorus
