// Hierarchical allgather: each host's blocks cross to every other host once,
// as one message per host pair's leaders, not one per rank.
//
// Terms (patterns/hierarchy.hpp): H hosts, host h with L_h ranks; leaders:
// local index 0 of each host; host order: every rank, host after host;
// B = count * element size (one rank's block), n ranks.
//
// Steps (each a collective of its own, its algorithm chosen for its team):
//   1. gather within each host to its leader, into the host's place in a
//      buffer of n blocks in host order;
//   2. allgatherv among the leaders (host h contributes L_h blocks), in
//      place: every leader has all n blocks in host order;
//   3. broadcast of the n blocks within each host from its leader;
//   4. every rank copies the blocks from host order to rank order. Where
//      host order is rank order, the buffer is the receive buffer itself and
//      there is nothing to copy.
//
// Bytes: across hosts, each leader sends its host's L_h * B and receives the
// other (n - L_h) * B, what any allgather must bring into a host; within a
// host, the gather's L_h * B and the broadcast's n * B.
#include <cstring>

#include "collectives/call.hpp"
#include "collectives/common/scratch_slots.hpp"
#include "collectives/common/subcall.hpp"
#include "collectives/patterns/hierarchy.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {
namespace {

void hierarchical_allgather(CollectiveContext& ctx, const CollectiveCall& c,
                            const CallShape& shape) {
  const Hierarchy& h = *ctx.team.hierarchy;
  const patterns::HostGroups& g = *h.groups;
  const int n = ctx.size(), me = ctx.rank(), my_host = g.host_of[me];
  const std::size_t block = c.count * shape.elem, whole = block * static_cast<std::size_t>(n);
  auto* recv = static_cast<std::byte*>(c.recv);
  std::byte* ordered =
      h.grouped ? recv : ctx.scratch.get(scratch_slot::hierarchy_blocks, whole).data();
  std::vector<std::size_t> counts;  // blocks' elements per host, for the leaders
  std::size_t host_at = 0;          // elements before this host's blocks, in host order
  for (int host = 0; host < g.host_count(); ++host) {
    const std::size_t elements = g.hosts[host].size() * c.count;
    if (host < my_host) host_at += elements;
    counts.push_back(elements);
  }

  CollectiveCall stage;
  stage.dtype = c.dtype;
  stage.kind = CollectiveKind::gather;
  stage.send = c.send;
  stage.recv = ordered + host_at * shape.elem;
  stage.count = c.count;
  stage.root = 0;
  run_on(ctx, *h.local, stage, StageRole::within, shape.bytes);

  if (h.leaders) {
    stage.kind = CollectiveKind::allgatherv;
    stage.send = ordered + host_at * shape.elem;
    stage.recv = ordered;
    stage.counts = counts.data();
    stage.root = -1;
    run_on(ctx, *h.leaders, stage, StageRole::across, shape.bytes);
  }

  stage.kind = CollectiveKind::broadcast;
  stage.send = nullptr;
  stage.recv = ordered;
  stage.counts = nullptr;
  stage.count = c.count * static_cast<std::size_t>(n);
  stage.root = 0;
  run_on(ctx, *h.local, stage, StageRole::within, shape.bytes);

  if (ordered == recv || block == 0) return;
  const std::vector<int> order = g.host_order();
  for (std::size_t at = 0; at < order.size(); ++at)
    std::memcpy(recv + static_cast<std::size_t>(order[at]) * block, ordered + at * block, block);
}

// A gather of its blocks within the widest host, an allgatherv of everything
// among the host leaders, and a broadcast of everything within the widest host.
double hierarchical_allgather_estimate(const CostModel&, const Team& team, std::size_t bytes) {
  const Hierarchy& h = *team.hierarchy;
  double us = stage_estimate_us(h, *h.across_shape, CollectiveKind::allgather, bytes);
  const std::size_t its_blocks =
      bytes / static_cast<std::size_t>(h.world->size()) * static_cast<std::size_t>(h.widest);
  if (h.widest > 1)
    us += stage_estimate_us(h, *h.local_shape, CollectiveKind::gather, its_blocks) +
          stage_estimate_us(h, *h.local_shape, CollectiveKind::broadcast, bytes);
  return us;
}

}  // namespace

extern const AlgorithmSpec hierarchical_allgather_spec{
    CollectiveKind::allgather,
    "hierarchical",
    "gather within each host, allgather among host leaders, broadcast within each host: one "
    "message per host pair",
    needs_several_hosts,
    hierarchical_allgather_estimate,
    hierarchical_allgather};

}  // namespace chorus
