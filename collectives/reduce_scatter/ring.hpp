// Pipelined ring reduce-scatter.
//
// Terms: n ranks in a ring (right = r + 1, left = r - 1, mod n); the buffer of
// N elements is cut into n chunks (equal for reduce_scatter, balanced for
// allreduce); chunk c ends up reduced on rank c. Each chunk is sent as
// segments of at most ctx.segment_bytes (patterns::segment).
//
// Steps: n - 1. At step s rank r sends chunk (r - s - 1) to the right and
// receives chunk (r - s - 2) from the left, into staging scratch, reducing it
// segment by segment with its own input: work[c] = input[c] op received. The
// chunk reduced at step s is the one sent at step s + 1, so each reduced
// segment is sent on at once, overlapping the transfer of segment k + 1 with
// the reduction of segment k. After step n - 2 rank r holds chunk r reduced
// over all ranks (AVG: summed only; the owner scales it).
//
// Bytes on the wire per rank: (n - 1) / n * N * elem sent and received, in
// (n - 1) * ceil(chunk / segment) messages. An empty chunk is still one empty
// message, so both sides always agree and every step checks the signature.
#pragma once

#include <cstddef>
#include <span>

#include "collectives/context.hpp"
#include "collectives/patterns/ring.hpp"

namespace chorus {

// The core. `chunks` has one Range per rank, in element units of `input`.
// input: this rank's contribution (read only, unless it aliases work/result).
// work: where the partially reduced chunks other than this rank's go, at their
//   chunk offsets; it may equal input (in-place allreduce). nullptr: reduce in
//   staging scratch and forward from there (memory bounded by one chunk).
// result: receives this rank's reduced chunk (chunks[rank].count elements);
//   may be input or work at chunks[rank].offset.
// Regions of input that are not this rank's chunk are only read.
void ring_reduce_scatter_chunks(CollectiveContext& ctx, const void* input, void* work, void* result,
                                std::span<const patterns::Range> chunks, DataType dtype,
                                ReduceOp op);

// MPI_Reduce_scatter_block: send holds size * recvcount elements; recv gets
// chunk `rank` of the reduction (AVG: divided by size). send is not modified.
// recv may be send + rank * recvcount (in place); any other overlap is a
// UsageError.
void ring_reduce_scatter(CollectiveContext& ctx, const void* send, void* recv,
                         std::size_t recvcount, DataType dtype, ReduceOp op);

}  // namespace chorus
