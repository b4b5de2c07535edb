#include "collectives/broadcast/ring.hpp"

#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include "base/core/log.hpp"
#include "collectives/common/broadcast_pipeline.hpp"
#include "collectives/patterns/ring.hpp"

namespace chorus {

void ring_broadcast(CollectiveContext& ctx, void* buf, std::size_t count, DataType dtype,
                    int root) {
  static spdlog::logger& log = logger("coll");
  const int n = ctx.size();
  const std::size_t e = dtype_size(dtype);
  log.debug("ring broadcast: {} ranks, count {} ({}), root {}, segment {} bytes", n, count,
            dtype_name(dtype), root, ctx.segment_bytes);
  if (n == 1) return;

  const patterns::ChainPosition pos = patterns::chain_position(ctx.rank(), n, root);
  const int last = (root + n - 1) % n;  // the chain's end, which confirms to all
  BroadcastTree chain;
  chain.parent = pos.parent;
  if (pos.child >= 0) chain.children = {pos.child};
  if (ctx.rank() == last) {
    for (int r = 0; r < n; ++r)
      if (r != last) chain.confirms.push_back(r);
  } else {
    chain.awaits = {last};
  }
  run_broadcast_pipeline(ctx, buf, count, e, chain);
}

// A pipelined chain: n - 1 hops, the buffer crossing each link once, and the
// confirmations' hop from the last rank.
double ring_broadcast_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  if (team.size() == 1) return 0;
  return team.size() * m.ring_alpha(team.placement, team.size()) +
         static_cast<double>(bytes) * m.ring_per_byte(team.placement);
}

extern const AlgorithmSpec ring_broadcast_spec{
    CollectiveKind::broadcast,
    "ring",
    "a pipelined chain from the root: each segment forwarded as soon as it arrives",
    runs_anywhere,
    ring_broadcast_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
      ring_broadcast(ctx, c.recv, c.count, c.dtype, c.root);
    },
    /*one_verdict=*/true,
    /*commit_point=*/true};

}  // namespace chorus
