#include "collectives/reduce_scatter/shm.hpp"

#include <algorithm>
#include <cstring>

#include "collectives/call.hpp"
#include "collectives/common/shm_pipeline.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {
namespace {

// Block k of the input (any size) is reduced onto rank k.
class ReduceScatterPlan final : public ShmPlan {
 public:
  ReduceScatterPlan(const std::byte* in, std::byte* out, std::vector<patterns::Range> blocks,
                    int me, std::size_t piece)
      : in_(in), out_(out), blocks_(std::move(blocks)), me_(me), piece_(piece) {}

  std::size_t output_bytes() const override { return mine().count; }
  uint64_t rounds() const override {
    std::size_t largest = 0;
    for (const auto& b : blocks_) largest = std::max(largest, b.count);
    return (largest + piece_ - 1) / piece_;
  }
  void stage(uint64_t b, std::vector<ShmStage>& out) const override {
    for (int k = 0; k < static_cast<int>(blocks_.size()); ++k)
      if (k != me_)
        if (std::size_t bytes = length(k, b))
          out.push_back(
              {in_ + block(k).offset + b * piece_, static_cast<std::size_t>(k) * piece_, bytes});
  }
  bool reduces() const override { return true; }
  void reduce(uint64_t b, std::vector<ShmReduce>& out) const override {
    out.push_back({static_cast<std::size_t>(me_) * piece_, out_ + b * piece_, length(me_, b),
                   in_ + mine().offset + b * piece_});
  }

 private:
  const patterns::Range& block(int k) const { return blocks_[static_cast<std::size_t>(k)]; }
  const patterns::Range& mine() const { return block(me_); }
  std::size_t length(int k, uint64_t b) const {
    const std::size_t at = b * piece_;
    return at < block(k).count ? std::min(piece_, block(k).count - at) : 0;
  }

  const std::byte* in_;
  std::byte* out_;
  std::vector<patterns::Range> blocks_;  // in bytes
  int me_;
  std::size_t piece_;
};

void run_reduce_scatter(CollectiveContext& ctx, const CollectiveCall& c, const CallShape& shape) {
  const int n = ctx.shm->size();
  std::vector<patterns::Range> blocks(static_cast<std::size_t>(n));
  std::size_t at = 0;
  for (int k = 0; k < n; ++k) {
    const std::size_t bytes = (c.is_v() ? c.counts[k] : c.count) * shape.elem;
    blocks[static_cast<std::size_t>(k)] = {at, bytes};
    at += bytes;
  }
  shm_reduce_scatter_blocks(ctx, c.send, c.recv, std::move(blocks), c.dtype, c.op);
}

double shm_reduce_scatter_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  return shm_estimate_us(m, team, bytes, 1.0);
}

}  // namespace

void shm_reduce_scatter_blocks(CollectiveContext& ctx, const void* send, void* recv,
                               std::vector<patterns::Range> blocks, DataType dtype, ReduceOp op) {
  const int me = ctx.shm->rank();
  auto* out = static_cast<std::byte*>(recv);
  const auto* in = static_cast<const std::byte*>(send);
  if (ctx.shm->size() == 1) {
    const auto& own = blocks[static_cast<std::size_t>(me)];
    if (own.count && out != in + own.offset) std::memcpy(out, in + own.offset, own.count);
    return;
  }
  ReduceScatterPlan plan(in, out, std::move(blocks), me, ctx.shm->layout().base_piece());
  run_shm_pipeline(ctx, plan, dtype, op);
}

void shm_reduce_scatter(CollectiveContext& ctx, const void* send, void* recv, std::size_t recvcount,
                        DataType dtype, ReduceOp op) {
  CollectiveCall c;
  c.kind = CollectiveKind::reduce_scatter;
  c.send = send;
  c.recv = recv;
  c.count = recvcount;
  c.dtype = dtype;
  c.op = op;
  CallShape shape;
  shape.elem = dtype_size(dtype);
  run_reduce_scatter(ctx, c, shape);
}

extern const AlgorithmSpec shm_reduce_scatter_spec{
    CollectiveKind::reduce_scatter,
    "shm",
    "every rank reduces its block straight from the others' staged data in shared memory",
    needs_shared_memory,
    shm_reduce_scatter_estimate,
    run_reduce_scatter,
    /*one_verdict=*/true};

extern const AlgorithmSpec shm_reduce_scatterv_spec{
    CollectiveKind::reduce_scatterv,
    "shm",
    "every rank reduces its own-sized block straight from the others' staged data",
    needs_shared_memory,
    shm_reduce_scatter_estimate,
    run_reduce_scatter,
    /*one_verdict=*/true};

}  // namespace chorus
