// One pipelined pairwise step of the halving/doubling family (Rabenseifner's
// reduce-scatter and allgather): a rank sends one element range to a peer
// while receiving another from it, both cut into segments of at most
// ctx.segment_bytes (patterns::segment), so that a received segment is
// processed while the next ones are still on the wire.
//
// Receives are posted first (a few ahead, in order), then every send; each
// received segment is handed to `landed` in order as soon as it arrives. A
// range of 0 elements is one empty message, as in the ring pipeline, so both
// sides always exchange and check the call's signature. Returns after every
// send and receive has completed.
#pragma once

#include <cstddef>
#include <functional>

#include "collectives/context.hpp"
#include "collectives/patterns/ring.hpp"

namespace chorus {

struct Exchange {
  int peer = 0;
  std::size_t elem_size = 1;
  const std::byte* out_base = nullptr;  // the range `out` is read at out_base + offset * elem_size
  patterns::Range out;
  std::byte* in_base = nullptr;  // segment s of `in` lands at in_base + (s.offset - in.offset) * e
  patterns::Range in;
  // Called with each received segment (absolute element range) and where it landed.
  std::function<void(patterns::Range seg, std::byte* data)> landed;
  // If set, send or receive each segment (absolute element range) themselves,
  // in place of reading out_base or landing at in_base (a call in parts:
  // common/parts_io.hpp); landed then gets null data.
  std::function<RequestPtr(patterns::Range seg)> send_placed;
  std::function<RequestPtr(patterns::Range seg)> recv_placed;
};

void run_exchange(CollectiveContext& ctx, const Exchange& x);

}  // namespace chorus
