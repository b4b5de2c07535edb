// The shared-memory plan in which every rank stages its own block and some
// ranks copy every block out: gather (the root) and allgatherv (everyone).
#pragma once

#include <vector>

#include "collectives/context.hpp"
#include "collectives/patterns/ring.hpp"

namespace chorus {

// blocks: byte ranges of recv, one per rank (any size); this rank's block
// comes from send. Gatherers copy every block into recv (their own only when
// send is not already in place).
void shm_gather_blocks(CollectiveContext& ctx, const void* send, void* recv,
                       std::vector<patterns::Range> blocks, bool gathers);

}  // namespace chorus
