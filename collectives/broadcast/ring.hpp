// Pipelined chain ("ring") broadcast.
//
// Terms: n ranks ordered as a chain starting at the root, in ring order:
// root, root + 1, ..., root - 1 (patterns::chain_position). The buffer is cut
// into segments of at most ctx.segment_bytes.
//
// Steps: the root sends every segment to its child. Every other rank receives
// segment k from its parent straight into buf and forwards it to its child
// (if any) at once, while segment k + 1 is arriving; a few receives are posted
// ahead. With S segments the last rank has everything after about n - 1 + S
// segment times, rather than (n - 1) * S without pipelining. The last rank
// then confirms to every other rank (a zero-byte message each), and they
// return only after it: the last rank has the buffer only once every rank
// before it had it, whereas a rank that returned after its own part (the
// root after sending) would succeed where a rank further down failed, left
// or called something else.
//
// Bytes on the wire per rank: N * elem received (except the root) and sent
// (except the last rank), in ceil(N / segment) messages (1 when N = 0); the
// last rank's n - 1 confirmations carry no bytes.
#pragma once

#include <cstddef>

#include "collectives/context.hpp"

namespace chorus {

// buf (count elements) on every rank becomes root's buf. root outside
// [0, size) is a UsageError.
void ring_broadcast(CollectiveContext& ctx, void* buf, std::size_t count, DataType dtype, int root);

}  // namespace chorus
