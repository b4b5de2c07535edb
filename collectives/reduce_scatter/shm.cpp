#include "collectives/reduce_scatter/shm.hpp"

#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include <algorithm>

#include "collectives/common/shm_pipeline.hpp"

namespace chorus {
namespace {

class ReduceScatterPlan final : public ShmPlan {
 public:
  ReduceScatterPlan(const std::byte* in, std::byte* out, std::size_t block, int ranks, int me,
                    std::size_t piece)
      : in_(in), out_(out), block_(block), ranks_(ranks), me_(me), piece_(piece) {}

  std::size_t output_bytes() const override { return block_; }
  uint64_t rounds() const override { return (block_ + piece_ - 1) / piece_; }
  void stage(uint64_t b, std::vector<ShmStage>& out) const override {
    for (int k = 0; k < ranks_; ++k)
      if (k != me_)
        out.push_back({in_ + static_cast<std::size_t>(k) * block_ + b * piece_,
                       static_cast<std::size_t>(k) * piece_, length(b)});
  }
  bool reduces() const override { return true; }
  ShmReduce reduce(uint64_t b) const override {
    return {static_cast<std::size_t>(me_) * piece_, out_ + b * piece_, length(b),
            in_ + static_cast<std::size_t>(me_) * block_ + b * piece_};
  }

 private:
  std::size_t length(uint64_t b) const { return std::min(piece_, block_ - b * piece_); }

  const std::byte* in_;
  std::byte* out_;
  std::size_t block_;
  int ranks_, me_;
  std::size_t piece_;
};

}  // namespace

void shm_reduce_scatter(CollectiveContext& ctx, const void* send, void* recv, std::size_t recvcount,
                        DataType dtype, ReduceOp op) {
  const std::size_t block = recvcount * dtype_size(dtype);
  if (block == 0) return;
  ReduceScatterPlan plan(static_cast<const std::byte*>(send), static_cast<std::byte*>(recv), block,
                         ctx.shm->size(), ctx.shm->rank(), ctx.shm->layout().piece_bytes);
  run_shm_pipeline(ctx, plan, dtype, op);
}


double shm_reduce_scatter_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  return shm_estimate_us(m, team, bytes, 1.0);
}

extern const AlgorithmSpec shm_reduce_scatter_spec{
    CollectiveKind::reduce_scatter, "shm",
    "every rank reduces its block straight from the others' staged data in shared memory",
    needs_shared_memory, shm_reduce_scatter_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
      shm_reduce_scatter(ctx, c.send, c.recv, c.count, c.dtype, c.op);
    }};

}  // namespace chorus
