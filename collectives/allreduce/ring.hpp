// Ring allreduce = ring reduce-scatter + ring allgather (Baidu / Horovod /
// Gloo's allreduce_ring_chunked).
//
// Terms: n ranks in a ring; the N-element buffer is cut into n balanced
// chunks (patterns::chunk: the first N % n chunks have one element more);
// segments of at most ctx.segment_bytes pipeline each step.
//
// Steps: 2 (n - 1).
//   1. Reduce-scatter (reduce_scatter/ring.hpp), n - 1 steps: afterwards rank
//      r's recv holds chunk r reduced over all ranks. Out of place it reads
//      send and writes only recv, so no initial copy is needed. AVG: the owner
//      divides its chunk by n, once.
//   2. Allgather (allgather/ring.hpp), n - 1 steps, in place in recv: every
//      chunk travels once around the ring.
//
// Rounds (ctx.ring_round_bytes, CHORUS_RING_ROUND): a call of at least
// patterns::kRingRoundsFrom rounds runs as one such allreduce per round of
// the buffer, one after another. Through memory (loopback TCP, UCX on one
// host) a round's data is then still in cache when its allgather reads
// what its reduce-scatter wrote and when the kernel copies it: 2 ranks over
// loopback TCP, medians of five alternated invocations, 8 MiB took 3.2 ms
// in rounds of 1 MiB against 4.1 whole, 32 MiB 10.6 against 17.4 (2 MiB:
// 0.59 against 0.49, hence the threshold). Between hosts each round would
// add the ring's fill and drain, so rounds are off there by default.
//
// In parts (CollectiveCall::scattered, collectives/scattered.hpp): the same
// steps and bytes, read and written where the parts lie. Reduce-scatter
// reduces each received segment into its staging slot against the parts'
// inputs (the owner's chunk straight into their outputs) and forwards from
// staging. Each stage's first chunk goes out as one gather send per segment
// (Transport::gathers_sends: sendmsg reads the parts themselves), or packed
// into scratch where the transport cannot. Allgather receives each segment
// straight into the outputs with a scatter receive (Transport::
// scatters_recvs: recvmsg fills the parts) and forwards it from there with
// a gather send; where the transport cannot do both, it receives into
// staging, copies each segment into the outputs and forwards from staging.
// Against packing the whole call around the algorithm (two copies of N),
// that leaves no copy in user space over TCP (the kernel's own stay), and
// one of (n - 1) / n of N elsewhere.
//
// Bytes on the wire per rank: 2 (n - 1) / n * N * elem sent and received
// (busbw = algbw * 2 (n - 1) / n), in 2 (n - 1) * ceil(chunk / segment)
// messages. Works for N = 0 and N < n (empty chunks are empty messages) and
// n = 1 (a copy, when out of place).
#pragma once

#include <cstddef>

#include "collectives/context.hpp"
#include "collectives/scattered.hpp"

namespace chorus {

// recv = reduction over ranks of send (count elements). send == recv is in
// place; any other overlap is a UsageError.
void ring_allreduce(CollectiveContext& ctx, const void* send, void* recv, std::size_t count,
                    DataType dtype, ReduceOp op);
// The same over a call in parts of count elements in all.
void ring_allreduce_parts(CollectiveContext& ctx, const ScatteredBuffers& parts, std::size_t count,
                          DataType dtype, ReduceOp op);

}  // namespace chorus
