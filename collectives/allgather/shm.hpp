// Shared-memory allgather for ranks of one host.
//
// Terms: n ranks of one shm::Domain; S bytes per rank (sendcount); a slot of
// n P bytes is used whole for one rank's contribution.
//
// Steps (common/shm_pipeline.hpp), round b covers bytes [b n P, (b + 1) n P)
// of every contribution: each rank stages that range of its input, then copies
// every rank's staged range into its block of the output (its own too, unless
// in place). Per rank: S copied in, n S copied out.
#pragma once

#include <cstddef>

#include "collectives/context.hpp"

namespace chorus {

// recv (size * sendcount elements) = every rank's send, in rank order;
// send == recv + rank * sendcount is in place.
void shm_allgather(CollectiveContext& ctx, const void* send, void* recv, std::size_t sendcount,
                   DataType dtype);

}  // namespace chorus
