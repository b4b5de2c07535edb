// Pipelined binomial-tree broadcast: the small-message broadcast.
//
// Terms (patterns/tree.hpp): n ranks, v = rank - root mod n, the binomial tree
// rooted at `root` (v's parent is v minus its lowest set bit, its children
// v + 2^k below that bit); depth d = ceil(log2 n); B = count * element size,
// cut into S segments of at most ctx.segment_bytes.
//
// Steps (common/broadcast_pipeline.hpp): every rank but the root receives
// segment k from its parent straight into the buffer and forwards it at once
// to each of its children, largest subtree first, while segment k + 1 is
// arriving: the last rank has the buffer after about d + S segment times.
// Then the confirmations climb the tree: a rank that has every segment and
// its children's confirmations confirms to its parent (a leaf at once), so
// the root learns that every rank has the buffer and took part in the same
// call (context.hpp, confirm). Last, the root confirms to every other rank
// (the release), and they return only after it: a rank that returned after
// its own subtree would succeed where a rank of another subtree failed.
//
// Bytes on the wire: B received by every rank but the root; B sent per child,
// so the root sends d * B. Steps: d hops down, d confirmations up, one
// release. Against the chain's n + S hops it wins while latency dominates:
// small B, many ranks.
#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include "base/core/log.hpp"
#include "collectives/common/broadcast_pipeline.hpp"
#include "collectives/patterns/tree.hpp"

namespace chorus {

namespace {

void tree_broadcast(CollectiveContext& ctx, void* buf, std::size_t count, DataType dtype,
                    int root) {
  static spdlog::logger& log = logger("coll");
  const int n = ctx.size();
  log.debug("tree broadcast: {} ranks, count {} ({}), root {}, segment {} bytes", n, count,
            dtype_name(dtype), root, ctx.segment_bytes);
  if (n == 1) return;
  const patterns::TreeNode node = patterns::binomial_node(ctx.rank(), n, root);
  BroadcastTree tree;
  tree.parent = node.parent;
  tree.children.assign(node.children.rbegin(), node.children.rend());  // largest subtree first
  tree.awaits = node.children;
  if (node.parent >= 0) {
    tree.confirms = {node.parent};
    tree.released_by = root;
  } else {
    for (int r = 0; r < n; ++r)
      if (r != root) tree.confirms.push_back(r);
  }
  run_broadcast_pipeline(ctx, buf, count, dtype_size(dtype), tree);
}

// d hops down, d confirmations up and the release; the root sends B to each
// of its d children (the pipeline overlaps the hops with the bytes).
double tree_broadcast_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  if (team.size() == 1) return 0;
  const double d = log2_ceil(team.size());
  return (2 * d + 1) * m.alpha(team.placement) +
         d * static_cast<double>(bytes) * m.exchange_per_byte(team.placement);
}

}  // namespace

extern const AlgorithmSpec tree_broadcast_spec{
    CollectiveKind::broadcast,
    "tree",
    "a pipelined binomial tree from the root: 2 ceil(log2 n) steps, for small buffers",
    runs_anywhere,
    tree_broadcast_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
      tree_broadcast(ctx, c.recv, c.count, c.dtype, c.root);
    },
    /*one_verdict=*/true,
    /*commit_point=*/true};

}  // namespace chorus
