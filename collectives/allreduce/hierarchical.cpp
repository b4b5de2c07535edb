// Hierarchical allreduce: the network carries each byte across a host
// boundary as few times as a flat algorithm between hosts would, and every
// rank of a host shares that work.
//
// Terms (patterns/hierarchy.hpp): H hosts, host h with L_h ranks, L = the
// fewest ranks of any host (lanes), B = count * element size. The buffer is
// cut into L balanced chunks; chunk j belongs to lane j (the ranks of local
// index j, one per host).
//
// Steps (each stage a collective of its own, its algorithm chosen for its
// team as a call of its own: shared memory within a host, the network's
// choice between hosts):
//   1. reduce-scatterv within each host: local rank j < L gets chunk j summed
//      over its host; ranks j >= L get nothing;
//   2. allreduce of chunk j within lane j (across hosts), in place; AVG is
//      reduced as SUM and divided by the job's rank count here, once, by the
//      owner of the chunk;
//   3. allgatherv within each host: every rank gets every chunk.
// Every rank ends with the same bits: each chunk is reduced once (by its
// lane, whose allreduce gives its members the same bits) and then copied.
//
// Bytes: between hosts, the lane allreduce moves B/L per lane, about
// 2(H-1)/H * B/L per lane rank with a ring, so a host sends 2(H-1)/H * B in
// all, as a ring over hosts would, spread over L ranks. Within a host the
// two shared-memory stages copy about 2B per rank.
#include "collectives/call.hpp"
#include "collectives/common/subcall.hpp"
#include "collectives/patterns/ring.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include <vector>

namespace chorus {
namespace {

void hierarchical_allreduce(CollectiveContext& ctx, const CollectiveCall& c,
                            const CallShape& shape) {
  const Hierarchy& h = *ctx.team.hierarchy;
  const Team& local = *h.local;
  const std::size_t e = dtype_size(c.dtype);
  const ReduceOp op = c.op == ReduceOp::avg ? ReduceOp::sum : c.op;
  const auto chunks = patterns::balanced_chunks(c.count, h.lanes);
  std::vector<std::size_t> counts(static_cast<std::size_t>(local.size()), 0);
  for (int j = 0; j < h.lanes; ++j) counts[static_cast<std::size_t>(j)] = chunks[j].count;
  const int me = local.index;
  auto* recv = static_cast<std::byte*>(c.recv);
  // A rank in no lane owns an empty block at the end of the buffer.
  const std::size_t offset = me < h.lanes ? chunks[me].offset : c.count;
  std::byte* mine = recv + offset * e;

  CollectiveCall stage;
  stage.dtype = c.dtype;
  stage.op = op;
  stage.counts = counts.data();
  stage.kind = CollectiveKind::reduce_scatterv;
  stage.send = c.send;  // in place (send == recv) is recv == send + offset, as it is
  stage.recv = mine;
  run_on(ctx, local, stage, StageRole::within, shape.bytes);

  if (h.lane) {
    CollectiveCall across;
    across.kind = CollectiveKind::allreduce;
    across.send = mine;
    across.recv = mine;
    across.count = counts[static_cast<std::size_t>(me)];
    across.dtype = c.dtype;
    across.op = op;
    run_on(ctx, *h.lane, across, StageRole::across, shape.bytes);
    if (c.op == ReduceOp::avg && across.count > 0)
      scale_for_avg(mine, across.count, c.dtype, ctx.size());
  }

  stage.kind = CollectiveKind::allgatherv;
  stage.send = mine;
  stage.recv = recv;
  run_on(ctx, local, stage, StageRole::within, shape.bytes);
}

// Within hosts, the reduce-scatter and allgather the widest host would
// choose; across hosts, the allreduce a lane would choose for its chunk (the
// lane's placement counts the lanes that share each host's link). Every
// input is the same on every rank, so is the choice.
double hierarchical_estimate(const CostModel&, const Team& team, std::size_t bytes) {
  const Hierarchy& h = *team.hierarchy;
  const std::size_t chunk = (bytes + static_cast<std::size_t>(h.lanes) - 1) / h.lanes;
  double us = stage_estimate_us(h, *h.lane_shape, CollectiveKind::allreduce, chunk);
  if (h.widest > 1)
    us += stage_estimate_us(h, *h.local_shape, CollectiveKind::reduce_scatterv, bytes) +
          stage_estimate_us(h, *h.local_shape, CollectiveKind::allgatherv, bytes);
  return us;
}

}  // namespace

extern const AlgorithmSpec hierarchical_allreduce_spec{
    CollectiveKind::allreduce,
    "hierarchical",
    "reduce-scatter within each host, allreduce across hosts per lane, allgather within each "
    "host: each host's link carries 2(H-1)/H of the buffer, shared by its ranks",
    needs_several_hosts,
    hierarchical_estimate,
    hierarchical_allreduce};

}  // namespace chorus
