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
// Verdicts (context.hpp, confirm): every rank returns success only once it
// knows that every rank has the buffer; a rank that returned as soon as its
// own part was done would succeed where a peer further down failed, left or
// called something else. So each rank first posts the confirmations it
// awaits (`awaits`); once it has received and forwarded every segment and
// those have come, it confirms to `confirms`, and then waits for
// `released_by`'s confirmation, if any. The chain: every rank awaits the
// last one, which has the buffer only once every rank before it had it, and
// which confirms to all. The tree: every rank awaits its children and
// confirms to its parent, so the root's confirmations cover every rank; the
// root then confirms to every other rank (the release), which each awaits.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/context.hpp"

namespace chorus {

struct BroadcastTree {
  int parent = -1;            // -1 on the root
  std::vector<int> children;  // forwarded to in this order
  std::vector<int> awaits;    // ranks whose confirmation this rank waits for
  std::vector<int> confirms;  // the ranks this rank confirms to once those came
  int released_by = -1;       // the rank whose confirmation it awaits last, or -1
};

void run_broadcast_pipeline(CollectiveContext& ctx, void* buf, std::size_t count,
                            std::size_t elem_size, const BroadcastTree& tree);

}  // namespace chorus
