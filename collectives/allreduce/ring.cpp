#include "collectives/allreduce/ring.hpp"

#include "collectives/allgather/ring.hpp"
#include "collectives/common/validate.hpp"
#include "collectives/patterns/ring.hpp"
#include "collectives/reduce_scatter/ring.hpp"
#include "base/core/log.hpp"

namespace chorus {

void ring_allreduce(CollectiveContext& ctx, const void* send, void* recv, std::size_t count,
                    DataType dtype, ReduceOp op) {
  static spdlog::logger& log = logger("coll");
  const int n = ctx.size();
  const int rank = ctx.rank();
  const std::size_t e = dtype_size(dtype);
  checked_total(count, 1, e, "allreduce");
  log.debug("ring allreduce: {} ranks, count {} ({}, {}), segment {} bytes", n, count,
            dtype_name(dtype), op_name(op), ctx.segment_bytes);
  if (count > 0) {
    require_buffer(send, "allreduce send");
    require_buffer(recv, "allreduce recv");
    if (send != recv && overlaps(send, count * e, recv, count * e))
      throw UsageError("allreduce: send and recv overlap without being the same buffer");
  }
  const auto chunks = patterns::balanced_chunks(count, n);
  const patterns::Range own = chunks[static_cast<std::size_t>(rank)];
  auto* result = static_cast<std::byte*>(recv) + own.offset * e;
  ring_reduce_scatter_chunks(ctx, send, recv, result, chunks, dtype, op);
  if (op == ReduceOp::avg && own.count > 0) scale_for_avg(result, own.count, dtype, n);
  ring_allgather_chunks(ctx, recv, chunks, e);
}

}  // namespace chorus
