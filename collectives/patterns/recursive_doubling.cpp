#include "collectives/patterns/recursive_doubling.hpp"

#include "base/core/error.hpp"

namespace chorus::patterns {

int pow2_floor(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

int rd_rounds(int n) {
  int rounds = 0;
  for (int p = pow2_floor(n); p > 1; p /= 2) ++rounds;
  return rounds;
}

int rd_round_partner(int rank, int round) {
  return rank ^ (1 << round);
}

bool rd_is_extra(int rank, int n) {
  return rank >= pow2_floor(n);
}

int rd_extra_partner(int rank, int n) {
  const int p = pow2_floor(n);
  if (rank >= p) return rank - p;
  if (rank + p < n) return rank + p;
  return -1;
}

Range window_range(std::span<const Range> chunks, ChunkWindow window) {
  CHORUS_CHECK(window.first >= 0 && window.width > 0 &&
                   static_cast<std::size_t>(window.first + window.width) <= chunks.size(),
               "window [{}, +{}) of {} chunks", window.first, window.width, chunks.size());
  const Range first = chunks[static_cast<std::size_t>(window.first)];
  const Range last = chunks[static_cast<std::size_t>(window.first + window.width - 1)];
  return Range{first.offset, last.end() - first.offset};
}

}  // namespace chorus::patterns
