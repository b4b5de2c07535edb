// Double binary tree allreduce (NCCL's tree algorithm).
//
// Terms (patterns/tree.hpp): n ranks; two binary trees over them (tree 1 is
// tree 0 mirrored for even n, shifted by one rank for odd n), so that a rank
// interior in one is a leaf in the other (odd n: but rank 0); depth d =
// ceil(log2 n). The N-element buffer is cut into two halves (patterns::chunk);
// tree t carries half t, cut into segments of at most ctx.segment_bytes;
// B = N * element size.
//
// Steps, per tree and segment, pipelined:
//   up    a rank receives its children's partials of segment k (a few posted
//         ahead, into staging), combines them with its own in a fixed order
//         (a child below this rank first, one above last) in the result buffer, and sends that
//         partial to its parent; the root's is the result (AVG: divided by n, once, by the root);
//   down  the root sends segment k of the result to its children; every other
//         rank receives it from its parent straight into the result buffer and
//         forwards it to its children. Every rank thus ends with the bits the
//         root computed.
// Every rank runs the same schedule: step j does up(tree 0, j), up(tree 1, j),
// down(tree 0, j - L), down(tree 1, j - L) (L = kLag). An operation waits only
// on operations earlier in that order (children's up of the same segment,
// the parent's down), so no cycle of waits can form, and each pair of ranks
// sends and posts its messages in the same order (the transport matches per
// peer in order). While a rank waits for segment k to come down, segments up
// to k + L are climbing.
//
// Bytes on the wire per rank: each tree moves its half up and down once, so a
// rank interior in one tree (a leaf in the other) sends about 2B and receives
// about 2B, and reduces B; steps: about 2d plus the segments of a half.
// Against the ring (2(n - 1) steps of B/n) it wins on latency for mid-sized
// buffers, with more bytes per rank; against recursive doubling (B per round)
// on bytes. No separate confirmation: every rank receives the result, which
// the root computed from every rank's contribution.
#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/core/log.hpp"
#include "collectives/common/ring_pipeline.hpp"
#include "collectives/common/scratch_slots.hpp"
#include "collectives/patterns/tree.hpp"

namespace chorus {

namespace {

using patterns::Range;

// Segments the down phase trails the up phase; receives posted ahead; staging
// segments for children's partials (a rank has at most 2 children per step
// but rank 0 of an odd n, so about kLag steps of them).
constexpr std::size_t kLag = 8;
constexpr std::size_t kWindow = 64;
constexpr std::size_t kStaging = 16;

struct Tree {
  patterns::TreeNode node;
  Range half;
  std::size_t segs = 0;
};

struct Op {
  int tree = 0;
  bool up = true;
  std::size_t seg = 0;
};

// One expected message, in the order the schedule consumes them.
struct Incoming {
  int peer = 0;
  std::byte* data = nullptr;  // null: the next staging slot
  std::size_t bytes = 0;
};

void double_binary_tree_allreduce(CollectiveContext& ctx, const void* send, void* recv,
                                  std::size_t count, DataType dtype, ReduceOp op) {
  static spdlog::logger& log = logger("coll");
  const int n = ctx.size(), me = ctx.rank();
  const std::size_t e = dtype_size(dtype);
  log.debug("double binary tree allreduce: {} ranks, count {} ({}, {}), segment {} bytes", n, count,
            dtype_name(dtype), op_name(op), ctx.segment_bytes);
  auto* result = static_cast<std::byte*>(recv);
  if (send != recv && count > 0) std::memcpy(result, send, count * e);
  if (n == 1) return;  // AVG over one rank is the identity
  const ReduceFn reduce = reduce_fn(dtype, op);
  const std::size_t seg_elems = patterns::segment_elems(ctx.segment_bytes, e);

  Tree trees[2];
  for (int t = 0; t < 2; ++t) {
    trees[t].node = patterns::dtree_node(me, n, t);
    trees[t].half = patterns::chunk(count, 2, t);
    trees[t].segs = patterns::segment_count(trees[t].half.count, seg_elems);
  }
  auto segment = [&](int t, std::size_t k) {
    return patterns::segment(trees[t].half, seg_elems, k);
  };

  // The schedule and the receives it consumes, in order.
  std::vector<Op> ops;
  std::vector<Incoming> in;
  const std::size_t steps = std::max(trees[0].segs, trees[1].segs) + kLag;
  for (std::size_t j = 0; j < steps; ++j) {
    for (int t = 0; t < 2; ++t) {
      if (j >= trees[t].segs) continue;
      ops.push_back({t, true, j});
      for (int c : trees[t].node.children) in.push_back({c, nullptr, segment(t, j).count * e});
    }
    for (int t = 0; t < 2; ++t) {
      if (j < kLag || j - kLag >= trees[t].segs) continue;
      ops.push_back({t, false, j - kLag});
      const Range sg = segment(t, j - kLag);
      if (trees[t].node.parent >= 0)
        in.push_back({trees[t].node.parent, result + sg.offset * e, sg.count * e});
    }
  }

  const std::size_t slot_bytes = std::min(seg_elems, (count + 1) / 2) * e;
  std::byte* staging =
      ctx.scratch.get(scratch_slot::tree_incoming, std::max<std::size_t>(kStaging * slot_bytes, 1))
          .data();
  std::vector<RequestPtr> recvs(in.size());
  std::vector<std::byte*> landed(in.size());
  // Receives are posted in schedule order (so per peer in the order it
  // sends), up to kWindow ahead of the one consumed next; a staged one only
  // once the partial kStaging staged receives earlier has been reduced.
  std::size_t posted = 0, consumed = 0, staged = 0, unstaged = 0;
  auto post = [&] {
    while (posted < in.size() && posted < consumed + kWindow) {
      Incoming& m = in[posted];
      if (!m.data && staged == unstaged + kStaging) break;
      landed[posted] = m.data ? m.data : staging + (staged++ % kStaging) * slot_bytes;
      recvs[posted] = ctx.recv(m.peer, {landed[posted], m.bytes});
      ++posted;
    }
  };
  auto next = [&] {
    post();
    RequestPtr& r = recvs[consumed];
    wait_request(ctx, r);
    r.reset();
    return landed[consumed++];
  };
  std::vector<RequestPtr> sends;
  std::size_t checked = 0;  // sends[0, checked) are known to have succeeded

  for (const Op& o : ops) {
    const Tree& tree = trees[o.tree];
    const Range sg = segment(o.tree, o.seg);
    std::byte* mine = result + sg.offset * e;
    const std::span<const std::byte> bytes(mine, sg.count * e);
    if (o.up) {
      for (int c : tree.node.children) {
        std::byte* theirs = next();
        if (sg.count > 0 && c < me)
          reduce(mine, theirs, mine, sg.count);
        else if (sg.count > 0)
          reduce(mine, mine, theirs, sg.count);
        ++unstaged;  // its staging segment is free again
      }
      if (tree.node.parent >= 0)
        sends.push_back(ctx.send(tree.node.parent, bytes));
      else if (op == ReduceOp::avg && sg.count > 0)
        scale_for_avg(mine, sg.count, dtype, n);
    } else {
      // A rank's partial of this segment went up; what comes down replaces
      // it. The parent sends only after receiving the partial, so the
      // receive (posted ahead into the same bytes) cannot land before.
      if (tree.node.parent >= 0) next();
      for (int c : tree.node.children) sends.push_back(ctx.send(c, bytes));
    }
    while (checked < sends.size() && sends[checked]->done())
      sends[checked++]->completion().rethrow_if_failed();
  }
  ctx.wait(std::span<const RequestPtr>(sends).subspan(checked));
}

// About 2 d steps (up and down); the busiest rank sends and receives about
// 2B and reduces B.
double double_binary_tree_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  if (team.size() == 1) return 0;
  const double d = log2_ceil(team.size()), b = static_cast<double>(bytes);
  return 2 * d * m.alpha(team.placement) + 2 * b * m.exchange_per_byte(team.placement) +
         b * m.reduce_us_per_byte;
}

}  // namespace

extern const AlgorithmSpec double_binary_tree_allreduce_spec{
    CollectiveKind::allreduce,
    "double_binary_tree",
    "two complementary binary trees each reduce and broadcast half the buffer, pipelined: "
    "2 log2(n) steps",
    runs_anywhere,
    double_binary_tree_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
      double_binary_tree_allreduce(ctx, c.send, c.recv, c.count, c.dtype, c.op);
    }};

}  // namespace chorus
