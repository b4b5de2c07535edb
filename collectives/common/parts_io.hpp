// Messages to and from a call in parts (collectives/scattered.hpp): a range
// of the call's bytes sent or received as one message, read and written
// where the parts lie when the transport can (gather sends, scatter
// receives), through a buffer of the caller's otherwise. The peer cannot
// tell either from a message of one buffer.
#pragma once

#include <cstddef>

#include "collectives/context.hpp"
#include "collectives/scattered.hpp"

namespace chorus {

// Sends the call's bytes [offset, offset + length) of the parts' inputs (or
// outputs) to `peer` as one message: a gather send, or packed into `packed`
// (length bytes) first. Null `packed`: gather, only where
// ctx.gathers_sends(peer).
RequestPtr send_parts(CollectiveContext& ctx, int peer, const ScatteredBuffers& parts, bool inputs,
                      std::size_t offset, std::size_t length, std::byte* packed);

// Receives one message of `length` bytes from `peer` into the parts' outputs
// of the call's bytes [offset, offset + length): a scatter receive, only
// where ctx.scatters_recvs(peer).
RequestPtr recv_parts(CollectiveContext& ctx, int peer, const ScatteredBuffers& parts,
                      std::size_t offset, std::size_t length);

}  // namespace chorus
