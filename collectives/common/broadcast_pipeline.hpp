// The segment pipeline of the broadcasts that forward along a tree (the ring
// broadcast's chain is a tree whose ranks have one child each; the tree
// broadcast's is binomial).
//
// Each rank receives segment k of the buffer (at most ctx.segment_bytes) from
// its parent straight into the buffer, a few receives posted ahead, and at
// once forwards it to each of its children, while segment k + 1 is arriving;
// the root only sends. With S segments and depth d the last rank has
// everything after about d + S segment times rather than d * S.
//
// Verdicts (context.hpp, confirm): a rank that only sends would return before
// any receiver could disagree. So each rank first posts the confirmations it
// awaits (`awaits`), and once it has received and forwarded every segment and
// those confirmations have come, it confirms to `confirms` (if any). The
// chain: the root awaits the last rank, which confirms to it. The tree: every
// rank awaits its children and confirms to its parent, so the root's
// confirmations cover every rank.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/context.hpp"

namespace chorus {

struct BroadcastTree {
  int parent = -1;            // -1 on the root
  std::vector<int> children;  // forwarded to in this order
  std::vector<int> awaits;    // ranks whose confirmation this rank waits for
  int confirms = -1;          // the rank this rank confirms to at the end, or -1
};

void run_broadcast_pipeline(CollectiveContext& ctx, void* buf, std::size_t count,
                            std::size_t elem_size, const BroadcastTree& tree);

}  // namespace chorus
