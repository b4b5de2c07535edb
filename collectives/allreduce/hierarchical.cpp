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
// choice between hosts), per segment (below):
//   1. reduce-scatterv within each host: local rank j < L gets chunk j summed
//      over its host; ranks j >= L get nothing;
//   2. allreduce of chunk j within lane j (across hosts), in place; AVG is
//      reduced as SUM and divided by the job's rank count here, once, by the
//      owner of the chunk;
//   3. allgatherv within each host: every rank gets every chunk.
// Every rank ends with the same bits: each chunk is reduced once (by its
// lane, whose allreduce gives its members the same bits) and then copied.
//
// Segments (patterns::stage_segments): a large call is cut into S segments,
// each going through the three steps with its own L chunks. Step 2 of
// segment s runs on a thread of its own (SideStages) while this thread runs
// step 3 of segment s-1 and step 1 of segment s+1, so the network works
// while memory does: the order per rank is 1(0), 1(1), 3(0), 1(2), 3(1), ...,
// 3(S-1) within the host and 2(0), 2(1), ... across hosts.
//
// Bytes: between hosts, the lane allreduce moves B/L per lane, about
// 2(H-1)/H * B/L per lane rank with a ring, so a host sends 2(H-1)/H * B in
// all, as a ring over hosts would, spread over L ranks. Within a host the
// two shared-memory stages copy about 2B per rank. Segments change no byte
// count; they add S-1 latencies of each stage.
#include "collectives/call.hpp"
#include "collectives/common/side_stages.hpp"
#include "collectives/common/subcall.hpp"
#include "collectives/patterns/hierarchy.hpp"
#include "collectives/patterns/ring.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include <algorithm>
#include <vector>

namespace chorus {
namespace {

// One segment's part of the call: its chunk counts per local rank (zero
// past the lanes) and where this rank's chunk of it starts.
struct SegmentPlan {
  patterns::Range range;
  std::vector<std::size_t> counts;
  std::size_t mine = 0;  // element offset of this rank's chunk (the segment's end when none)
};

std::vector<SegmentPlan> plan_segments(const Hierarchy& h, std::size_t count, std::size_t bytes) {
  const int me = h.local->index;
  std::vector<SegmentPlan> plans;
  for (const patterns::Range& r :
       patterns::balanced_chunks(count, patterns::stage_segments(bytes, h.widest))) {
    SegmentPlan p{r, std::vector<std::size_t>(static_cast<std::size_t>(h.local->size()), 0), 0};
    const auto chunks = patterns::balanced_chunks(r.count, h.lanes);
    for (int j = 0; j < h.lanes; ++j) p.counts[static_cast<std::size_t>(j)] = chunks[j].count;
    p.mine = r.offset + (me < h.lanes ? chunks[me].offset : r.count);
    plans.push_back(std::move(p));
  }
  return plans;
}

void hierarchical_allreduce(CollectiveContext& ctx, const CollectiveCall& c,
                            const CallShape& shape) {
  const Hierarchy& h = *ctx.team.hierarchy;
  const Team& local = *h.local;
  const std::size_t e = dtype_size(c.dtype);
  const ReduceOp op = c.op == ReduceOp::avg ? ReduceOp::sum : c.op;
  const int me = local.index;
  const auto* send = static_cast<const std::byte*>(c.send);
  auto* recv = static_cast<std::byte*>(c.recv);
  const std::vector<SegmentPlan> plans = plan_segments(h, c.count, shape.bytes);
  const int segments = static_cast<int>(plans.size());

  auto within = [&](CollectiveKind kind, const SegmentPlan& p) {
    CollectiveCall stage;
    stage.kind = kind;
    stage.dtype = c.dtype;
    stage.op = op;
    stage.counts = p.counts.data();
    if (kind == CollectiveKind::reduce_scatterv) {
      // In place (send == recv) is recv == send + offset, as it is.
      stage.send = send + p.range.offset * e;
      stage.recv = recv + p.mine * e;
    } else {
      stage.send = recv + p.mine * e;
      stage.recv = recv + p.range.offset * e;
    }
    run_on(ctx, local, stage, StageRole::within, shape.bytes);
  };

  // The lanes' allreduces run beside this thread, with scratch of their own.
  const bool threaded = segments > 1 && h.lane && ctx.transport.allows_concurrent_waits();
  CollectiveContext side_ctx =
      CollectiveContext::over(ctx.team, threaded ? ctx.scratch.side() : ctx.scratch, ctx.sig,
                              ctx.deadline, ctx.segment_bytes, ctx.spin);
  auto across = [&](int s) {
    if (!h.lane) return;
    const SegmentPlan& p = plans[static_cast<std::size_t>(s)];
    CollectiveCall call;
    call.kind = CollectiveKind::allreduce;
    call.send = call.recv = recv + p.mine * e;
    call.count = p.counts[static_cast<std::size_t>(me)];
    call.dtype = c.dtype;
    call.op = op;
    run_on(side_ctx, *h.lane, call, StageRole::across, shape.bytes);
    if (c.op == ReduceOp::avg && call.count > 0)
      scale_for_avg(call.recv, call.count, c.dtype, ctx.size());
  };

  SideStages side(across, threaded);
  for (int s = 0; s < segments; ++s) {
    within(CollectiveKind::reduce_scatterv, plans[static_cast<std::size_t>(s)]);
    side.release(s);
    if (s == 0) continue;
    side.wait(s - 1, ctx.deadline);
    within(CollectiveKind::allgatherv, plans[static_cast<std::size_t>(s - 1)]);
  }
  side.wait(segments - 1, ctx.deadline);
  within(CollectiveKind::allgatherv, plans.back());
}

// Within hosts, the reduce-scatter and allgather the widest host would
// choose; across hosts, the allreduce a lane would choose for its chunk (the
// lane's placement counts the lanes that share each host's link), per
// segment. Where the hosts' ranks share memory (what real jobs run, on
// transports that allow the side thread), the stages of a host overlap the
// network but for the first and last segment; elsewhere (chorus-sim) they
// follow each other. Every input is the same on every rank, so is the choice.
double hierarchical_estimate(const CostModel&, const Team& team, std::size_t bytes) {
  const Hierarchy& h = *team.hierarchy;
  const int segments = patterns::stage_segments(bytes, h.widest);
  const std::size_t segment = (bytes + segments - 1) / segments;
  const std::size_t chunk = (segment + static_cast<std::size_t>(h.lanes) - 1) / h.lanes;
  const double across = stage_estimate_us(h, *h.lane_shape, CollectiveKind::allreduce, chunk);
  double within = 0;
  if (h.widest > 1)
    within = stage_estimate_us(h, *h.local_shape, CollectiveKind::reduce_scatterv, segment) +
             stage_estimate_us(h, *h.local_shape, CollectiveKind::allgatherv, segment);
  if (segments > 1 && h.local_shape->shm_layout)
    return within + segments * std::max(across, within);
  return segments * (across + within);
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
