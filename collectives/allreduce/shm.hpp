// Shared-memory allreduce for ranks of one host (no system call, no kernel
// copy on the way).
//
// Terms: n ranks of one shm::Domain; N bytes per rank; P = the domain's piece
// size; small = its small-buffer size.
//
// Latency path (N <= small): each rank copies its input into its small buffer
// and posts its mail header (call number and signature); once every rank's
// header is there (and matches), every rank reduces the n buffers itself, in
// rank order. One synchronisation; each rank reads n * N.
//
// Pipeline (N > small; common/shm_pipeline.hpp): round b covers bytes
// [b n P, (b + 1) n P): each rank stages its block, reduces piece r (its own
// rank's) across all n staged blocks into its output and back into its slot,
// and copies the other n - 1 reduced pieces out of their owners' slots.
// Per rank: N copied in, N read and N/n written by the reduction, (n-1)N/n
// copied out; the segment is reused round after round, so it stays in cache.
//
// Buffers in parts (collectives/scattered.hpp): a piece that spans several
// parts is staged from, reduced from and gathered into each in turn, so the
// call moves the same bytes as in one buffer, in more, shorter copies.
#pragma once

#include <cstddef>

#include "collectives/context.hpp"
#include "collectives/scattered.hpp"

namespace chorus {

// recv = reduction over ranks of send (count elements); send == recv is in place.
void shm_allreduce(CollectiveContext& ctx, const void* send, void* recv, std::size_t count,
                   DataType dtype, ReduceOp op);
// The same with the input and output in parts (count elements in all).
void shm_allreduce_parts(CollectiveContext& ctx, const ScatteredBuffers& parts, std::size_t count,
                         DataType dtype, ReduceOp op);
// The pipeline of shm_allreduce with the root alone copying the result out
// (recv is ignored elsewhere): the shared-memory reduce.
void shm_reduce(CollectiveContext& ctx, const void* send, void* recv, std::size_t count,
                DataType dtype, ReduceOp op, int root);

}  // namespace chorus
