// Shared-memory reduce: the allreduce pipeline (common/shm_pipeline.hpp)
// with only the root gathering.
//
// Terms: n ranks share a domain; a round covers n pieces of the buffer, piece
// j reduced by rank j. Steps per round: every rank stages the pieces the
// others reduce; rank j reduces piece j across all slots, in rank order, into
// its own slot (reading its own input in place); the root copies every
// reduced piece out. Bytes per rank: (n-1)/n B staged, B/n reduced from n
// inputs; the root copies B out. Nothing crosses a socket.
#include <algorithm>

#include "collectives/call.hpp"
#include "collectives/common/shm_pipeline.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {
namespace {

class ReducePlan final : public ShmPlan {
 public:
  ReducePlan(const std::byte* in, std::byte* out, std::size_t total, int ranks, int me, int root,
             std::size_t piece)
      : in_(in), out_(out), total_(total), ranks_(ranks), me_(me), root_(root), piece_(piece) {}

  std::size_t output_bytes() const override { return me_ == root_ ? total_ : 0; }
  uint64_t rounds() const override { return (total_ + block() - 1) / block(); }
  void stage(uint64_t b, std::vector<ShmStage>& out) const override {
    for (int j = 0; j < ranks_; ++j) {
      auto [start, bytes] = piece_of(b, j);
      if (j != me_ && bytes)
        out.push_back({in_ + start, static_cast<std::size_t>(j) * piece_, bytes});
    }
  }
  bool reduces() const override { return true; }
  bool gathers_reduced() const override { return true; }
  ShmReduce reduce(uint64_t b) const override {
    auto [start, bytes] = piece_of(b, me_);
    return {static_cast<std::size_t>(me_) * piece_, me_ == root_ ? out_ + start : nullptr, bytes,
            in_ + start};
  }
  void gather(uint64_t b, std::vector<ShmGather>& out) const override {
    if (me_ != root_) return;
    for (int j = 0; j < ranks_; ++j) {
      if (j == me_) continue;
      auto [start, bytes] = piece_of(b, j);
      if (bytes) out.push_back({j, static_cast<std::size_t>(j) * piece_, out_ + start, bytes});
    }
  }

 private:
  std::size_t block() const { return piece_ * static_cast<std::size_t>(ranks_); }
  std::pair<std::size_t, std::size_t> piece_of(uint64_t b, int j) const {
    std::size_t start = b * block() + static_cast<std::size_t>(j) * piece_;
    return {start, start < total_ ? std::min(piece_, total_ - start) : 0};
  }

  const std::byte* in_;
  std::byte* out_;
  std::size_t total_;
  int ranks_, me_, root_;
  std::size_t piece_;
};

void shm_reduce(CollectiveContext& ctx, const CollectiveCall& c, const CallShape& shape) {
  const std::size_t total = c.count * shape.elem;
  auto* out = static_cast<std::byte*>(c.recv);
  if (ctx.shm->size() == 1) {
    if (total && out != c.send) std::memcpy(out, c.send, total);
    return;
  }
  ReducePlan plan(static_cast<const std::byte*>(c.send), out, total, ctx.shm->size(),
                  ctx.shm->rank(), c.root, ctx.shm->layout().piece_bytes);
  run_shm_pipeline(ctx, plan, c.dtype, c.op);
}

double shm_reduce_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  return shm_estimate_us(m, team, bytes, 1.0);
}

}  // namespace

extern const AlgorithmSpec shm_reduce_spec{
    CollectiveKind::reduce,
    "shm",
    "every rank reduces its share from the others' staged data; the root copies it all out",
    needs_shared_memory,
    shm_reduce_estimate,
    shm_reduce};

}  // namespace chorus
