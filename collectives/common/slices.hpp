// Consecutive slices of a buffer, one after another: the rounds of the ring
// and Rabenseifner allreduces (CollectiveContext::ring_round_bytes,
// patterns::ring_round_elems: a round's data stays in cache while its
// allgather sends what its reduce-scatter wrote) and the pieces of a
// compressed allreduce (allreduce/wire.hpp). Every rank cuts the same
// slices from the same count.
#pragma once

#include <algorithm>
#include <cstddef>

namespace chorus {

// Calls body(offset, count) for slices of at most `slice` elements that
// cover [0, count) in order; once with (0, 0) for a zero count, which is a
// call too. slice > 0.
template <typename Body>
void for_each_slice(std::size_t count, std::size_t slice, Body&& body) {
  std::size_t at = 0;
  do {
    const std::size_t m = std::min(slice, count - at);
    body(at, m);
    at += m;
  } while (at < count);
}

}  // namespace chorus
