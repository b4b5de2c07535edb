// Pure rank arithmetic of recursive doubling (small-message allreduce) and of
// recursive halving (Rabenseifner's reduce-scatter and the allgather that
// undoes it).
//
// Terms:
//   n       number of ranks
//   p       the largest power of two <= n (the "core" ranks are 0..p-1)
//   extra   a rank r >= p; it is folded into its partner r - p before the
//           exchange rounds and gets the result back from it afterwards
//   round   k = 0..log2(p)-1: core rank r exchanges with r XOR 2^k
//   window  a run of `width` consecutive chunks of the p chunks a buffer is
//           cut into; rank r's window of width w starts at chunk r / w * w
//   halving round k = 0..log2(p)-1: core rank r exchanges with r XOR w,
//           w = p >> (k + 1): it keeps (and reduces) its window of width w and
//           sends its partner's, so after the last round it holds chunk r
//   doubling allgather round k = 0..log2(p)-1: rank r swaps its window of
//           width 2^k with r XOR 2^k's, so after the last round it holds all
#pragma once

#include <cstddef>
#include <span>

#include "collectives/patterns/ring.hpp"

namespace chorus::patterns {

int pow2_floor(int n);  // largest power of two <= n (n >= 1)
int rd_rounds(int n);   // log2(pow2_floor(n))
int rd_round_partner(int rank, int round);
bool rd_is_extra(int rank, int n);      // rank >= pow2_floor(n)
int rd_extra_partner(int rank, int n);  // r +/- p for ranks that have one, else -1

// Chunks [first, first + width).
struct ChunkWindow {
  int first = 0;
  int width = 1;
};
// The window of width `width` (a power of two) that holds chunk `rank`.
inline ChunkWindow window_of(int rank, int width) {
  return {rank / width * width, width};
}
// Width of the windows of halving round `round` over p chunks: p >> (round + 1).
inline int rh_width(int p, int round) {
  return p >> (round + 1);
}
// The elements of a window of contiguous, in-order chunks.
Range window_range(std::span<const Range> chunks, ChunkWindow window);

}  // namespace chorus::patterns
