// Topology-ordered ring allreduce: the ring of ring.hpp over the ranks in
// host order (patterns/hierarchy.hpp), so that whatever the placement of
// ranks (say, round-robin over hosts, mpirun's --map-by node) the ring
// crosses each host boundary once in each direction, as it does when the
// ranks of a host are consecutive.
//
// Steps and bytes: those of ring.hpp, 2(n-1) steps of B/n; of each rank's
// 2(n-1)/n * B, only the ranks at a host's edge send across a host boundary,
// so each host's link carries 2(n-1)/n * B per direction, where the ring in
// rank order under round-robin placement makes every rank's traffic cross.
#include "collectives/allreduce/ring.hpp"
#include "collectives/call.hpp"
#include "collectives/common/subcall.hpp"
#include "collectives/registry.hpp"

namespace chorus {
namespace {

void ring_by_host_allreduce(CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
  CollectiveContext ordered =
      CollectiveContext::over(*ctx.team.hierarchy->host_ordered, ctx.scratch, ctx.sig, ctx.deadline,
                              ctx.segment_bytes, ctx.spin);
  ring_allreduce(ordered, c.send, c.recv, c.count, c.dtype, c.op);
}

// The ring's estimate over the host order: each host's link carries one
// ring edge each way, where the rank order may make it carry several.
double ring_by_host_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  const AlgorithmSpec* ring = find_algorithm(CollectiveKind::allreduce, "ring");
  return ring->estimate_us(m, *team.hierarchy->host_ordered, bytes);
}

}  // namespace

extern const AlgorithmSpec ring_by_host_allreduce_spec{
    CollectiveKind::allreduce,
    "ring_by_host",
    "the ring over the ranks grouped by host: each host boundary crossed once, whatever the "
    "placement",
    needs_several_hosts,
    ring_by_host_estimate,
    ring_by_host_allreduce};

}  // namespace chorus
