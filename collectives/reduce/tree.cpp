// Binomial-tree reduce: the small-message reduce.
//
// Terms (patterns/tree.hpp): n ranks, v = rank - root mod n, B = count *
// element size. Each rank keeps a partial result: its input, combined with
// its children's partials as they arrive.
//
// Steps: ceil(log2 n) rounds. A rank receives its children's partials in
// round order (smallest subtree first), combining each into its own
// (partial = partial op child), then sends the partial to its parent. The
// root's partial is the result (AVG divided by n once, at the root). The root
// then confirms to every other rank (a zero-byte message), and they return
// only after it: a rank whose part ends with a send could not know that the
// root took part in the same call.
//
// Bytes on the wire: B per rank but the root (sent once), B per child
// received; the root receives ceil(log2 n) times B. Against the ring reduce's
// 2(n - 1) steps of B/n it wins while latency dominates.
#include <cstring>

#include "collectives/call.hpp"
#include "collectives/common/scratch_slots.hpp"
#include "collectives/context.hpp"
#include "collectives/patterns/tree.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {
namespace {

void tree_reduce(CollectiveContext& ctx, const CollectiveCall& c, const CallShape& shape) {
  const int n = ctx.size(), me = ctx.rank();
  const std::size_t bytes = c.count * shape.elem;
  const auto* in = static_cast<const std::byte*>(c.send);
  const bool root = me == c.root;
  // The partial result: the root's output buffer, else scratch.
  std::byte* partial = root ? static_cast<std::byte*>(c.recv)
                            : ctx.scratch.get(scratch_slot::tree_partial, bytes).data();
  if (bytes && partial != in) std::memcpy(partial, in, bytes);
  if (n == 1) return;
  const patterns::TreeNode node = patterns::binomial_node(me, n, c.root);
  const ReduceFn fn = reduce_fn(c.dtype, c.op);
  if (!node.children.empty()) {
    std::byte* incoming = ctx.scratch.get(scratch_slot::tree_incoming, bytes).data();
    for (int child : node.children) {
      ctx.wait(ctx.recv(child, {incoming, bytes}));
      if (bytes) fn(partial, partial, incoming, c.count);
    }
  }
  if (root) {
    if (c.op == ReduceOp::avg && c.count) scale_for_avg(partial, c.count, c.dtype, n);
    ctx.confirm_to_all();
  } else {
    const RequestPtr both[] = {ctx.await_confirmation(c.root),
                               ctx.send(node.parent, {partial, bytes})};
    ctx.wait(both);
  }
}

double tree_reduce_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  const double b = static_cast<double>(bytes);
  const Placement& p = team.placement;
  return m.alpha(p) +  // the root's confirmation
         log2_ceil(team.size()) *
             (m.alpha(p) + b * (m.exchange_per_byte(p) + m.reduce_us_per_byte));
}

}  // namespace

extern const AlgorithmSpec tree_reduce_spec{
    CollectiveKind::reduce,
    "tree",
    "partials climb a binomial tree to the root: ceil(log2 n) steps, for small buffers",
    runs_anywhere,
    tree_reduce_estimate,
    tree_reduce,
    /*one_verdict=*/true,
    /*commit_point=*/true};

}  // namespace chorus
