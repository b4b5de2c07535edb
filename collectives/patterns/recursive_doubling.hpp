// Pure rank arithmetic of recursive doubling (small-message allreduce).
//
// Terms:
//   n       number of ranks
//   p       the largest power of two <= n (the "core" ranks are 0..p-1)
//   extra   a rank r >= p; it is folded into its partner r - p before the
//           exchange rounds and gets the result back from it afterwards
//   round   k = 0..log2(p)-1: core rank r exchanges with r XOR 2^k
#pragma once

namespace chorus::patterns {

int pow2_floor(int n);  // largest power of two <= n (n >= 1)
int rd_rounds(int n);   // log2(pow2_floor(n))
int rd_round_partner(int rank, int round);
bool rd_is_extra(int rank, int n);      // rank >= pow2_floor(n)
int rd_extra_partner(int rank, int n);  // r +/- p for ranks that have one, else -1

}  // namespace chorus::patterns
