#include "collectives/allgather/shm.hpp"

#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include <algorithm>

#include "collectives/common/shm_pipeline.hpp"

namespace chorus {
namespace {

class AllgatherPlan final : public ShmPlan {
 public:
  AllgatherPlan(const std::byte* in, std::byte* out, std::size_t contribution, int ranks, int me,
                std::size_t slot)
      : in_(in), out_(out), contribution_(contribution), ranks_(ranks), me_(me), slot_(slot) {}

  std::size_t output_bytes() const override {
    return contribution_ * static_cast<std::size_t>(ranks_);
  }
  uint64_t rounds() const override { return (contribution_ + slot_ - 1) / slot_; }
  void stage(uint64_t b, std::vector<ShmStage>& out) const override {
    out.push_back({in_ + b * slot_, 0, length(b)});
  }
  void gather(uint64_t b, std::vector<ShmGather>& out) const override {
    const bool in_place = in_ == out_ + static_cast<std::size_t>(me_) * contribution_;
    for (int j = 0; j < ranks_; ++j)
      if (j != me_ || !in_place)
        out.push_back(
            {j, 0, out_ + static_cast<std::size_t>(j) * contribution_ + b * slot_, length(b)});
  }

 private:
  std::size_t length(uint64_t b) const { return std::min(slot_, contribution_ - b * slot_); }

  const std::byte* in_;
  std::byte* out_;
  std::size_t contribution_;
  int ranks_, me_;
  std::size_t slot_;
};

}  // namespace

void shm_allgather(CollectiveContext& ctx, const void* send, void* recv, std::size_t sendcount,
                   DataType dtype) {
  const std::size_t contribution = sendcount * dtype_size(dtype);
  if (contribution == 0) return;
  AllgatherPlan plan(static_cast<const std::byte*>(send), static_cast<std::byte*>(recv),
                     contribution, ctx.shm->size(), ctx.shm->rank(),
                     ctx.shm->layout().slot_bytes());
  run_shm_pipeline(ctx, plan, dtype, ReduceOp::sum);
}

double shm_allgather_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  return shm_estimate_us(m, team, bytes, 0.0);
}

extern const AlgorithmSpec shm_allgather_spec{
    CollectiveKind::allgather,
    "shm",
    "each rank stages its block once; every rank copies them out",
    needs_shared_memory,
    shm_allgather_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
      shm_allgather(ctx, c.send, c.recv, c.count, c.dtype);
    },
    /*one_verdict=*/true};

}  // namespace chorus
