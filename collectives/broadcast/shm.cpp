#include "collectives/broadcast/shm.hpp"

#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include <algorithm>

#include "collectives/common/shm_pipeline.hpp"

namespace chorus {
namespace {

class BroadcastPlan final : public ShmPlan {
 public:
  BroadcastPlan(std::byte* buf, std::size_t total, int root, int me, std::size_t slot)
      : buf_(buf), total_(total), root_(root), me_(me), slot_(slot) {}

  std::size_t output_bytes() const override { return me_ == root_ ? 0 : total_; }
  uint64_t rounds() const override { return (total_ + slot_ - 1) / slot_; }
  void stage(uint64_t b, std::vector<ShmStage>& out) const override {
    if (me_ == root_) out.push_back({buf_ + b * slot_, 0, length(b)});
  }
  void gather(uint64_t b, std::vector<ShmGather>& out) const override {
    if (me_ != root_) out.push_back({root_, 0, buf_ + b * slot_, length(b)});
  }

 private:
  std::size_t length(uint64_t b) const { return std::min(slot_, total_ - b * slot_); }

  std::byte* buf_;
  std::size_t total_;
  int root_, me_;
  std::size_t slot_;
};

}  // namespace

void shm_broadcast(CollectiveContext& ctx, void* buf, std::size_t count, DataType dtype, int root) {
  const std::size_t total = count * dtype_size(dtype);
  if (total == 0 || ctx.shm->size() == 1) return;
  BroadcastPlan plan(static_cast<std::byte*>(buf), total, root, ctx.shm->rank(),
                     ctx.shm->layout().slot_bytes());
  run_shm_pipeline(ctx, plan, dtype, ReduceOp::sum);
}

double shm_broadcast_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  return shm_estimate_us(m, team, bytes, 0.0);
}

extern const AlgorithmSpec shm_broadcast_spec{
    CollectiveKind::broadcast,
    "shm",
    "the root stages its buffer once; every rank copies it out",
    needs_shared_memory,
    shm_broadcast_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
      shm_broadcast(ctx, c.recv, c.count, c.dtype, c.root);
    },
    /*one_verdict=*/true};

}  // namespace chorus
