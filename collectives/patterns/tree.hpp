// Pure rank arithmetic of the binomial tree (reduce), the pairwise exchange
// (alltoall) and variable chunk layouts (the v-collectives).
//
// Terms:
//   v        a rank's position relative to the root: (rank - root) mod n, so
//            the root is v = 0
//   binomial tree  v's parent is v minus its lowest set bit; its children are
//            v + 2^k for every 2^k below that bit (every k for the root)
//            while v + 2^k < n. A reduction climbs it in ceil(log2 n) rounds:
//            in round k, every v with bit k as its lowest set bit sends its
//            partial result to v - 2^k, which combines it.
//   pairwise exchange  step s = 1..n-1: rank r sends to (r + s) mod n and
//            receives from (r - s) mod n; every pair meets exactly once.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/patterns/ring.hpp"

namespace chorus::patterns {

struct TreeNode {
  int parent = -1;            // a rank (not relative); -1 for the root
  std::vector<int> children;  // ranks, in the order their partials are combined (round order)
};

// This rank's place in the binomial tree rooted at `root`.
TreeNode binomial_node(int rank, int size, int root);

// Pairwise exchange partners of step s (1 <= s < n).
inline int pairwise_send_peer(int rank, int size, int step) {
  return mod(rank + step, size);
}
inline int pairwise_recv_peer(int rank, int size, int step) {
  return mod(rank - step, size);
}

// Consecutive ranges of counts[0..parts): range r starts where r - 1 ends.
std::vector<Range> ranges_of(const std::size_t* counts, int parts);

}  // namespace chorus::patterns
