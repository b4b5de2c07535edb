#include "collectives/allreduce/ring.hpp"

#include <cstring>
#include <vector>

#include "base/core/log.hpp"
#include "collectives/allgather/ring.hpp"
#include "collectives/allreduce/wire_ring.hpp"
#include "collectives/call.hpp"
#include "collectives/common/parts_io.hpp"
#include "collectives/common/ring_pipeline.hpp"
#include "collectives/common/scratch_slots.hpp"
#include "collectives/common/slices.hpp"
#include "collectives/patterns/ring.hpp"
#include "collectives/reduce_scatter/ring.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {

namespace {

// One ring allreduce of `count` elements: reduce-scatter, then allgather.
void ring_allreduce_whole(CollectiveContext& ctx, const std::byte* send, std::byte* recv,
                          std::size_t count, DataType dtype, ReduceOp op) {
  const int n = ctx.size();
  const std::size_t e = dtype_size(dtype);
  const auto chunks = patterns::balanced_chunks(count, n);
  const patterns::Range own = chunks[static_cast<std::size_t>(ctx.rank())];
  std::byte* result = recv + own.offset * e;
  ring_reduce_scatter_chunks(ctx, send, recv, result, chunks, dtype, op);
  if (op == ReduceOp::avg && own.count > 0) scale_for_avg(result, own.count, dtype, n);
  ring_allgather_chunks(ctx, recv, chunks, e);
}

// One ring allreduce of the `count` elements of the parts from byte `base`.
void ring_allreduce_parts_whole(CollectiveContext& ctx, const ScatteredBuffers& parts,
                                std::size_t base, std::size_t count, DataType dtype, ReduceOp op) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const std::size_t e = dtype_size(dtype);
  const auto chunks = patterns::balanced_chunks(count, n);
  const patterns::Range own = chunks[static_cast<std::size_t>(rank)];
  auto stretches = [&](patterns::Range r, auto&& fn) {
    parts.for_each(base + r.offset * e, r.count * e, fn);
  };
  if (n == 1) {
    stretches(own, [](const std::byte* in, std::byte* out, std::size_t b) {
      if (in != out) std::memmove(out, in, b);
    });
    return;
  }
  const int right = patterns::ring_right(rank, n);
  const bool gather = ctx.gathers_sends(right);
  // A stage whose received segments stay in staging, forwarded from there,
  // and whose step 0 sends from the parts' inputs (reduce-scatter) or
  // outputs. Made when it runs: the allgather's packed chunk may take the
  // scratch the reduce-scatter's used.
  auto stage = [&](int first_chunk, bool inputs) {
    const patterns::Range first = chunks[static_cast<std::size_t>(first_chunk)];
    std::byte* packed =
        gather ? nullptr : ctx.scratch.get(scratch_slot::parts_packed, first.count * e).data();
    RingPipeline p;
    p.chunks = chunks;
    p.elem_size = e;
    p.first_chunk = first_chunk;
    p.send_first = [&ctx, &parts, right, inputs, base, e, first, packed](patterns::Range seg) {
      return send_parts(ctx, right, parts, inputs, base + seg.offset * e, seg.count * e,
                        packed ? packed + (seg.offset - first.offset) * e : nullptr);
    };
    p.staging_slot = scratch_slot::ring_staging;
    p.forwards_staging = true;
    return p;
  };

  const ReduceFn fn = reduce_fn(dtype, op);
  RingPipeline rs = stage(patterns::rs_send_chunk(rank, n, 0), true);
  rs.consume = [&](int, int chunk, patterns::Range seg, std::byte* data) -> const std::byte* {
    std::byte* at = data;
    stretches(seg, [&](const std::byte* in, std::byte* out, std::size_t b) {
      fn(chunk == rank ? out : at, in, at, b / e);
      at += b;
    });
    return data;
  };
  run_ring_pipeline(ctx, rs);
  if (op == ReduceOp::avg)
    stretches(own, [&](const std::byte*, std::byte* out, std::size_t b) {
      scale_for_avg(out, b / e, dtype, n);
    });

  RingPipeline ag = stage(patterns::ag_send_chunk(rank, n, 0), false);
  const int left = patterns::ring_left(rank, n);
  if (gather && ctx.scatters_recvs(left)) {
    // Each segment lands in the outputs and is forwarded from there.
    ag.recv_placed = [&](patterns::Range seg) {
      return recv_parts(ctx, left, parts, base + seg.offset * e, seg.count * e);
    };
    ag.forward_placed = ag.send_first;
  } else {
    ag.consume = [&](int, int, patterns::Range seg, std::byte* data) -> const std::byte* {
      parts.unpack(base + seg.offset * e, seg.count * e, data);
      return data;
    };
  }
  run_ring_pipeline(ctx, ag);
}

}  // namespace

void ring_allreduce_parts(CollectiveContext& ctx, const ScatteredBuffers& parts, std::size_t count,
                          DataType dtype, ReduceOp op) {
  static spdlog::logger& log = logger("coll");
  const std::size_t e = dtype_size(dtype);
  const std::size_t round = patterns::ring_round_elems(count, e, ctx.ring_round_bytes);
  const int n = ctx.size(), rank = ctx.rank();
  const bool gather = n > 1 && ctx.gathers_sends(patterns::ring_right(rank, n));
  const bool scatter = gather && ctx.scatters_recvs(patterns::ring_left(rank, n));
  log.debug(
      "ring allreduce in {} parts: {} ranks, count {} ({}, {}), segment {} bytes, rounds "
      "of {} elements, {} sends, {} receives",
      parts.size(), n, count, dtype_name(dtype), op_name(op), ctx.segment_bytes, round,
      gather ? "gather" : "packed", scatter ? "scatter" : "staged");
  for_each_slice(count, round, [&](std::size_t at, std::size_t m) {
    ring_allreduce_parts_whole(ctx, parts, at * e, m, dtype, op);
  });
}

void ring_allreduce(CollectiveContext& ctx, const void* send, void* recv, std::size_t count,
                    DataType dtype, ReduceOp op) {
  static spdlog::logger& log = logger("coll");
  const std::size_t e = dtype_size(dtype);
  const std::size_t round = patterns::ring_round_elems(count, e, ctx.ring_round_bytes);
  log.debug("ring allreduce: {} ranks, count {} ({}, {}), segment {} bytes, rounds of {} elements",
            ctx.size(), count, dtype_name(dtype), op_name(op), ctx.segment_bytes, round);
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  for_each_slice(count, round, [&](std::size_t at, std::size_t m) {
    ring_allreduce_whole(ctx, in + at * e, out + at * e, m, dtype, op);
  });
}

// reduce-scatter + allgather: 2(n-1) steps of B/n; (n-1)/n of B reduced.
double ring_allreduce_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  const double n = team.size(), b = static_cast<double>(bytes);
  if (team.size() == 1) return 0;
  return m.ring_time(team.placement, team.size(), 2 * (n - 1), b / n,
                     (n - 1) / n * b * m.reduce_us_per_byte);
}

extern const AlgorithmSpec ring_allreduce_spec{
    CollectiveKind::allreduce,
    "ring",
    "reduce-scatter then allgather around a ring: bandwidth-optimal, 2(n-1) steps",
    runs_anywhere,
    ring_allreduce_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
      if (c.scattered)
        ring_allreduce_parts(ctx, *c.scattered, c.count, c.dtype, c.op);
      else
        ring_allreduce(ctx, c.send, c.recv, c.count, c.dtype, c.op);
    },
    /*one_verdict=*/false,
    /*commit_point=*/false,
    /*run_wire=*/ring_wire_allreduce,
    /*takes_parts=*/true};

}  // namespace chorus
