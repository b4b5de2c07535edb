// Pipelined ring allgather.
//
// Terms: n ranks in a ring (right = r + 1, left = r - 1, mod n); the result
// buffer is cut into n chunks, chunk c contributed by rank c, each sent as
// segments of at most ctx.segment_bytes (patterns::segment).
//
// Steps: n - 1, starting with rank r's chunk r in place. At step s rank r
// sends chunk (r - s) to the right and receives chunk (r - s - 1) from the
// left straight into its place in the buffer; a received segment is forwarded
// at once (step s + 1), while the next one is still arriving. No scratch.
//
// Bytes on the wire per rank: (n - 1) / n * N * elem sent and received, in
// (n - 1) * ceil(chunk / segment) messages (an empty chunk is one empty
// message, so both sides agree and every step checks the signature).
#pragma once

#include <cstddef>
#include <span>

#include "collectives/context.hpp"
#include "collectives/patterns/ring.hpp"

namespace chorus {

// The core, in place: buf holds this rank's chunk chunks[rank] and receives
// every other chunk at its offset (element units of elem_size bytes).
void ring_allgather_chunks(CollectiveContext& ctx, void* buf,
                           std::span<const patterns::Range> chunks, std::size_t elem_size);

// MPI_Allgather: recv (size * sendcount elements) gets every rank's send in
// rank order. send may equal recv + rank * sendcount (in place); any other
// overlap is a UsageError.
void ring_allgather(CollectiveContext& ctx, const void* send, void* recv, std::size_t sendcount,
                    DataType dtype);

}  // namespace chorus
