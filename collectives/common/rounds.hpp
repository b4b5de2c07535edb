// Allreduce in rounds (CollectiveContext::ring_round_bytes, CHORUS_RING_ROUND):
// the reduce-scatter + allgather algorithms (ring, Rabenseifner) run a call
// of patterns::kRingRoundsFrom rounds or more as one whole allreduce per
// round of the buffer, one after another, so that a round's data is still
// in cache when its allgather sends what its reduce-scatter wrote and when
// the kernel copies it through a loopback socket (docs/architecture.md,
// "Algorithms"). Every rank cuts the same rounds from the same count.
#pragma once

#include <algorithm>
#include <cstddef>

#include "base/core/dtype.hpp"
#include "collectives/context.hpp"
#include "collectives/patterns/ring.hpp"

namespace chorus {

// Calls whole(send, recv, count) for each round's slice, in order; once with
// everything when the call is below the threshold (or rounds are off), and
// once for a zero count.
template <typename Whole>
void allreduce_in_rounds(const CollectiveContext& ctx, const void* send, void* recv,
                         std::size_t count, DataType dtype, Whole&& whole) {
  const std::size_t e = dtype_size(dtype);
  const std::size_t round = patterns::ring_round_elems(count, e, ctx.ring_round_bytes);
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  std::size_t at = 0;
  do {  // at least once: a zero count is a call too
    const std::size_t m = std::min(round, count - at);
    whole(static_cast<const void*>(in + at * e), static_cast<void*>(out + at * e), m);
    at += m;
  } while (at < count);
}

}  // namespace chorus
