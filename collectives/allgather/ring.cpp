#include "collectives/allgather/ring.hpp"

#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include <cstring>

#include "base/core/log.hpp"
#include "collectives/common/ring_pipeline.hpp"

namespace chorus {

using patterns::Range;

void ring_allgather_chunks(CollectiveContext& ctx, void* buf, std::span<const Range> chunks,
                           std::size_t elem_size) {
  const int n = ctx.size();
  if (n == 1) return;
  auto* b = static_cast<std::byte*>(buf);
  RingPipeline p;
  p.chunks = chunks;
  p.elem_size = elem_size;
  p.first_chunk = patterns::ag_send_chunk(ctx.rank(), n, 0);
  p.first_src = b;
  p.direct_recv = b;
  p.consume = [](int, int, Range, std::byte* data) -> const std::byte* { return data; };
  run_ring_pipeline(ctx, p);
}

void ring_allgather(CollectiveContext& ctx, const void* send, void* recv, std::size_t sendcount,
                    DataType dtype) {
  static spdlog::logger& log = logger("coll");
  const int n = ctx.size();
  const std::size_t e = dtype_size(dtype);
  log.debug("ring allgather: {} ranks, sendcount {} ({}), segment {} bytes", n, sendcount,
            dtype_name(dtype), ctx.segment_bytes);
  if (sendcount > 0) {
    auto* own =
        static_cast<std::byte*>(recv) + static_cast<std::size_t>(ctx.rank()) * sendcount * e;
    if (send != own) std::memcpy(own, send, sendcount * e);
  }
  const auto chunks = patterns::equal_chunks(sendcount, n);
  ring_allgather_chunks(ctx, recv, chunks, e);
}

// n - 1 steps, each rank receiving (n-1)/n of the result.
double ring_allgather_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  const double n = team.size();
  if (team.size() == 1) return 0;
  return m.ring_time(team.placement, team.size(), n - 1, static_cast<double>(bytes) / n, 0);
}

extern const AlgorithmSpec ring_allgather_spec{
    CollectiveKind::allgather,
    "ring",
    "every block travels once around a ring: n - 1 steps",
    runs_anywhere,
    ring_allgather_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
      ring_allgather(ctx, c.send, c.recv, c.count, c.dtype);
    }};

}  // namespace chorus
