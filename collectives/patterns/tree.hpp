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
//   binary tree (NCCL's btree)  root 0; a rank v > 0 whose lowest set bit is
//            b has parent (v - b) | 2b, or v - b when that is out of range,
//            and children v - b/2 and the first of v + b/2, v + b/4, ... that
//            is below n: odd ranks are leaves, even ranks interior. Rank 0 has
//            one child, the largest power of two below n. Depth ceil(log2 n).
//   double binary tree  tree 0 is the binary tree; tree 1 is its mirror
//            (rank v plays n - 1 - v) when n is even, and it shifted by one
//            (rank v plays v - 1 mod n) when n is odd. Even n: the interior
//            ranks of one tree are leaves of the other. Odd n >= 3: so are all
//            but rank 0, tree 0's root, which is interior in both.
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

// This rank's place in NCCL's binary tree of n ranks (root 0); children in
// ascending rank order.
TreeNode btree_node(int rank, int size);
// This rank's place in tree `tree` (0 or 1) of the double binary tree;
// children in ascending rank order.
TreeNode dtree_node(int rank, int size, int tree);
// The root of tree `tree` of the double binary tree: 0, and n - 1 (n even) or
// 1 (n odd, n > 1) for tree 1.
int dtree_root(int size, int tree);

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
