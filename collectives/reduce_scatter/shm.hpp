// Shared-memory reduce-scatter for ranks of one host.
//
// Terms: n ranks of one shm::Domain; R bytes per output (recvcount), so n R
// bytes of input per rank; P = the domain's piece size.
//
// Steps (common/shm_pipeline.hpp), round b covers bytes [b P, (b + 1) P) of
// every output: each rank stages that range of each of the others' input
// blocks (piece k = destined for rank k), then reduces piece r (its own: its
// input in place, the others' slots) into its output. Nothing is gathered.
// Per rank: (n-1) R copied in, n R read and R written by the reduction.
// Blocks may differ in size (reduce_scatterv): rounds then run to the largest.
#pragma once

#include <cstddef>

#include <vector>

#include "collectives/context.hpp"
#include "collectives/patterns/ring.hpp"

namespace chorus {

// recv (recvcount elements) = rank's block of the reduction of send
// (size * recvcount elements); recv == send + rank * recvcount is in place.
void shm_reduce_scatter(CollectiveContext& ctx, const void* send, void* recv, std::size_t recvcount,
                        DataType dtype, ReduceOp op);
// The same over blocks of any size (byte ranges of send; block k goes to
// rank k); recv == send + blocks[rank].offset is in place.
void shm_reduce_scatter_blocks(CollectiveContext& ctx, const void* send, void* recv,
                               std::vector<patterns::Range> blocks, DataType dtype, ReduceOp op);

}  // namespace chorus
