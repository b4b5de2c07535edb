// Ring allgatherv: the ring allgather (allgather/ring.hpp) over chunks of the
// ranks' own sizes: block r has counts[r] elements, back to back in rank
// order. Steps n - 1; bytes per rank: the total minus its own block, received
// (and, but for one block, forwarded). Empty blocks are empty messages.
#include <cstring>

#include "collectives/allgather/ring.hpp"
#include "collectives/call.hpp"
#include "collectives/patterns/tree.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {
namespace {

void ring_allgatherv(CollectiveContext& ctx, const CollectiveCall& c, const CallShape& shape) {
  const int me = ctx.rank();
  const auto chunks = patterns::ranges_of(c.counts, ctx.size());
  auto* out = static_cast<std::byte*>(c.recv);
  const patterns::Range own = chunks[static_cast<std::size_t>(me)];
  std::byte* mine = out + own.offset * shape.elem;
  if (own.count && mine != c.send) std::memcpy(mine, c.send, own.count * shape.elem);
  ring_allgather_chunks(ctx, out, chunks, shape.elem);
}

double ring_allgatherv_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  const double n = team.size();
  if (team.size() == 1) return 0;
  return m.ring_time(team.placement, team.size(), n - 1, static_cast<double>(bytes) / n, 0);
}

}  // namespace

extern const AlgorithmSpec ring_allgatherv_spec{
    CollectiveKind::allgatherv,
    "ring",
    "the ring allgather over blocks of each rank's own size",
    runs_anywhere,
    ring_allgatherv_estimate,
    ring_allgatherv};

}  // namespace chorus
