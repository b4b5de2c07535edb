// Shared-memory broadcast for ranks of one host.
//
// Terms: n ranks of one shm::Domain; N bytes; slots of n P bytes.
//
// Steps (common/shm_pipeline.hpp), round b covers bytes [b n P, (b + 1) n P):
// the root stages that range, every other rank copies it out of the root's
// slot. The root copies N in; every other rank copies N out.
#pragma once

#include <cstddef>

#include "collectives/context.hpp"

namespace chorus {

void shm_broadcast(CollectiveContext& ctx, void* buf, std::size_t count, DataType dtype, int root);

}  // namespace chorus
