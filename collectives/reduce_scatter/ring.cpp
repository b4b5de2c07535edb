#include "collectives/reduce_scatter/ring.hpp"

#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include <cstring>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "collectives/common/ring_pipeline.hpp"
#include "collectives/common/scratch_slots.hpp"
#include "collectives/common/validate.hpp"

namespace chorus {

using patterns::Range;

void ring_reduce_scatter_chunks(CollectiveContext& ctx, const void* input, void* work, void* result,
                                std::span<const Range> chunks, DataType dtype, ReduceOp op) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const std::size_t e = dtype_size(dtype);
  const ReduceFn fn = reduce_fn(dtype, op);
  const auto* in = static_cast<const std::byte*>(input);
  auto* wk = static_cast<std::byte*>(work);
  auto* res = static_cast<std::byte*>(result);
  const Range own = chunks[static_cast<std::size_t>(rank)];

  if (n == 1) {
    const std::byte* src = in + own.offset * e;
    if (own.count > 0 && src != res) std::memmove(res, src, own.count * e);
    return;
  }

  RingPipeline p;
  p.chunks = chunks;
  p.elem_size = e;
  p.first_chunk = patterns::rs_send_chunk(rank, n, 0);
  p.first_src = in;
  p.staging_slot = scratch_slot::ring_staging;
  p.forwards_staging = (wk == nullptr);
  p.consume = [&](int, int chunk, Range seg, std::byte* data) -> const std::byte* {
    std::byte* dst;
    if (chunk == rank)
      dst = res + (seg.offset - own.offset) * e;
    else
      dst = wk ? wk + seg.offset * e : data;
    if (seg.count > 0) fn(dst, in + seg.offset * e, data, seg.count);
    return dst;
  };
  run_ring_pipeline(ctx, p);
}

void ring_reduce_scatter(CollectiveContext& ctx, const void* send, void* recv,
                         std::size_t recvcount, DataType dtype, ReduceOp op) {
  static spdlog::logger& log = logger("coll");
  const int n = ctx.size();
  log.debug("ring reduce_scatter: {} ranks, recvcount {} ({}, {}), segment {} bytes", n, recvcount,
            dtype_name(dtype), op_name(op), ctx.segment_bytes);
  const auto chunks = patterns::equal_chunks(recvcount, n);
  ring_reduce_scatter_chunks(ctx, send, nullptr, recv, chunks, dtype, op);
  if (op == ReduceOp::avg && recvcount > 0) scale_for_avg(recv, recvcount, dtype, n);
}

// n - 1 steps, each rank receiving and reducing (n-1)/n of the input.
double ring_reduce_scatter_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  const double n = team.size(), b = static_cast<double>(bytes);
  if (team.size() == 1) return 0;
  return m.ring_time(team.placement, team.size(), n - 1, b / n,
                     (n - 1) / n * b * m.reduce_us_per_byte);
}

extern const AlgorithmSpec ring_reduce_scatter_spec{
    CollectiveKind::reduce_scatter,
    "ring",
    "partial sums travel a ring, each block reduced on its way to its owner: n - 1 steps",
    runs_anywhere,
    ring_reduce_scatter_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
      ring_reduce_scatter(ctx, c.send, c.recv, c.count, c.dtype, c.op);
    }};

}  // namespace chorus
