// Shared-memory gather: every rank stages its block through its slot; the
// root copies them all out (common/shm_pipeline.hpp). Rounds of one slot per
// rank; bytes: B staged per rank, (n - 1) B copied out by the root.
#include <algorithm>
#include <cstring>

#include "collectives/call.hpp"
#include "collectives/common/shm_pipeline.hpp"
#include "collectives/gather/shm.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {
namespace {

// Ranks stage their (possibly different-sized) blocks; `gatherers` copy them
// out. Gather: the root; allgather(v): everyone.
class BlocksPlan final : public ShmPlan {
 public:
  BlocksPlan(const std::byte* in, std::byte* out, std::vector<patterns::Range> blocks, int me,
             bool gathers, std::size_t slot)
      : in_(in), out_(out), blocks_(std::move(blocks)), me_(me), gathers_(gathers), slot_(slot) {}

  std::size_t output_bytes() const override { return gathers_ ? blocks_.back().end() : 0; }
  uint64_t rounds() const override {
    std::size_t largest = 0;
    for (const auto& b : blocks_) largest = std::max(largest, b.count);
    return (largest + slot_ - 1) / slot_;
  }
  void stage(uint64_t b, std::vector<ShmStage>& out) const override {
    if (std::size_t bytes = length(me_, b)) out.push_back({in_ + b * slot_, 0, bytes});
  }
  void gather(uint64_t b, std::vector<ShmGather>& out) const override {
    if (!gathers_) return;
    for (int j = 0; j < static_cast<int>(blocks_.size()); ++j) {
      std::byte* dst = out_ + blocks_[static_cast<std::size_t>(j)].offset + b * slot_;
      if (j == me_ && dst == in_ + b * slot_) continue;  // in place
      if (std::size_t bytes = length(j, b)) out.push_back({j, 0, dst, bytes});
    }
  }

 private:
  std::size_t length(int j, uint64_t b) const {
    const std::size_t size = blocks_[static_cast<std::size_t>(j)].count, at = b * slot_;
    return at < size ? std::min(slot_, size - at) : 0;
  }

  const std::byte* in_;
  std::byte* out_;
  std::vector<patterns::Range> blocks_;  // in bytes
  int me_;
  bool gathers_;
  std::size_t slot_;
};

void shm_gather(CollectiveContext& ctx, const CollectiveCall& c, const CallShape& shape) {
  const int n = ctx.shm->size();
  const std::size_t block = c.count * shape.elem;
  std::vector<patterns::Range> blocks(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) blocks[static_cast<std::size_t>(j)] = {j * block, block};
  shm_gather_blocks(ctx, c.send, c.recv, std::move(blocks), ctx.shm->rank() == c.root);
}

double shm_gather_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  return shm_estimate_us(m, team, bytes, 0.0);
}

}  // namespace

void shm_gather_blocks(CollectiveContext& ctx, const void* send, void* recv,
                       std::vector<patterns::Range> blocks, bool gathers) {
  BlocksPlan plan(static_cast<const std::byte*>(send), static_cast<std::byte*>(recv),
                  std::move(blocks), ctx.shm->rank(), gathers, ctx.shm->layout().slot_bytes());
  run_shm_pipeline(ctx, plan, DataType::u8, ReduceOp::sum);
}

extern const AlgorithmSpec shm_gather_spec{
    CollectiveKind::gather,
    "shm",
    "every rank stages its block once; the root copies them out",
    needs_shared_memory,
    shm_gather_estimate,
    shm_gather,
    /*one_verdict=*/true};

}  // namespace chorus
