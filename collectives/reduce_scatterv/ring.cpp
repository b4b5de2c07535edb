// Ring reduce-scatterv: the ring reduce-scatter (reduce_scatter/ring.hpp)
// over chunks of the ranks' own sizes: rank r keeps counts[r] elements, the
// blocks lying back to back in rank order. Steps n - 1; AVG is scaled once, by
// each block's owner.
#include "collectives/reduce_scatter/ring.hpp"
#include "collectives/call.hpp"
#include "collectives/patterns/tree.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {
namespace {

void ring_reduce_scatterv(CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
  const auto chunks = patterns::ranges_of(c.counts, ctx.size());
  ring_reduce_scatter_chunks(ctx, c.send, nullptr, c.recv, chunks, c.dtype, c.op);
  const std::size_t own = c.counts[ctx.rank()];
  if (c.op == ReduceOp::avg && own) scale_for_avg(c.recv, own, c.dtype, ctx.size());
}

double ring_reduce_scatterv_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  const double n = team.size(), b = static_cast<double>(bytes);
  if (team.size() == 1) return 0;
  return m.ring_time(team.placement, team.size(), n - 1, b / n,
                     (n - 1) / n * b * m.reduce_us_per_byte);
}

}  // namespace

extern const AlgorithmSpec ring_reduce_scatterv_spec{
    CollectiveKind::reduce_scatterv,
    "ring",
    "the ring reduce-scatter over blocks of each rank's own size",
    runs_anywhere,
    ring_reduce_scatterv_estimate,
    ring_reduce_scatterv};

}  // namespace chorus
