#include "collectives/allgather/ring.hpp"

#include <cstring>

#include "collectives/common/ring_pipeline.hpp"
#include "collectives/common/validate.hpp"
#include "base/core/log.hpp"

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
  const std::size_t total = checked_total(sendcount, n, e, "allgather");
  log.debug("ring allgather: {} ranks, sendcount {} ({}), segment {} bytes", n, sendcount,
            dtype_name(dtype), ctx.segment_bytes);
  if (sendcount > 0) {
    require_buffer(send, "allgather send");
    require_buffer(recv, "allgather recv");
    auto* own =
        static_cast<std::byte*>(recv) + static_cast<std::size_t>(ctx.rank()) * sendcount * e;
    if (send != own) {
      if (overlaps(send, sendcount * e, recv, total * e))
        throw UsageError(
            "allgather: send overlaps recv other than at recv + rank * sendcount (in place)");
      std::memcpy(own, send, sendcount * e);
    }
  }
  const auto chunks = patterns::equal_chunks(sendcount, n);
  ring_allgather_chunks(ctx, recv, chunks, e);
}

}  // namespace chorus
