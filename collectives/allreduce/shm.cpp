#include "collectives/allreduce/shm.hpp"

#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <vector>

#include "collectives/common/shm_pipeline.hpp"

namespace chorus {
namespace {

// Rank j reduces piece j of every round across all ranks' inputs; then every
// rank (allreduce, root < 0) or the root alone (reduce) copies the reduced
// pieces out.
class AllreducePlan final : public ShmPlan {
 public:
  AllreducePlan(const std::byte* in, std::byte* out, std::size_t total, int ranks, int me,
                std::size_t piece, int root)
      : in_(in), out_(out), total_(total), ranks_(ranks), me_(me), piece_(piece), root_(root) {}

  std::size_t output_bytes() const override { return receives() ? total_ : 0; }
  bool output_is_input() const override { return in_ == out_; }
  uint64_t rounds() const override { return (total_ + block() - 1) / block(); }
  // Every piece but its own: it reduces that one straight from its input.
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
    return {static_cast<std::size_t>(me_) * piece_, receives() ? out_ + start : nullptr, bytes,
            in_ + start};
  }
  void gather(uint64_t b, std::vector<ShmGather>& out) const override {
    if (!receives()) return;
    for (int j = 0; j < ranks_; ++j) {
      if (j == me_) continue;
      auto [start, bytes] = piece_of(b, j);
      if (bytes) out.push_back({j, static_cast<std::size_t>(j) * piece_, out_ + start, bytes});
    }
  }

 private:
  bool receives() const { return root_ < 0 || me_ == root_; }
  std::size_t block() const { return piece_ * static_cast<std::size_t>(ranks_); }
  // Where rank j's piece of round b lies in the buffer, and its length.
  std::pair<std::size_t, std::size_t> piece_of(uint64_t b, int j) const {
    std::size_t start = b * block() + static_cast<std::size_t>(j) * piece_;
    return {start, start < total_ ? std::min(piece_, total_ - start) : 0};
  }

  const std::byte* in_;
  std::byte* out_;
  std::size_t total_;
  int ranks_, me_;
  std::size_t piece_;
  int root_;
};

void small_allreduce(CollectiveContext& ctx, const std::byte* in, std::byte* out, std::size_t count,
                     DataType dtype, ReduceOp op) {
  shm::Domain& domain = *ctx.shm;
  const std::size_t bytes = count * dtype_size(dtype);
  const shm::WaitSpec spec = shm_wait_spec(ctx);
  // Announced for the waits of ranks in another kind of call; this path's
  // own check is the signature digest in each rank's mail header.
  domain.announce(ctx.sig);
  const uint64_t call = domain.take_mail_call();
  std::memcpy(domain.small_buffer(domain.rank(), call), in, bytes);
  const uint64_t digest = signature_digest(ctx.sig);
  domain.post_mail(call, digest);
  domain.wait_mail(call, ctx.sig, digest, spec);
  // No allocation on the latency path for up to kStackInputs ranks.
  constexpr int kStackInputs = 16;
  std::array<const std::byte*, kStackInputs> on_stack;
  std::vector<const std::byte*> on_heap;
  const auto n = static_cast<std::size_t>(domain.size());
  if (n > kStackInputs) on_heap.resize(n);
  std::span<const std::byte*> inputs =
      n > kStackInputs ? std::span(on_heap) : std::span(on_stack).first(n);
  for (std::size_t j = 0; j < n; ++j) inputs[j] = domain.small_buffer(static_cast<int>(j), call);
  reduce_in_rank_order(out, inputs, count, dtype, op);
}

}  // namespace

void shm_allreduce(CollectiveContext& ctx, const void* send, void* recv, std::size_t count,
                   DataType dtype, ReduceOp op) {
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  const std::size_t bytes = count * dtype_size(dtype);
  if (bytes == 0) return;
  if (ctx.shm->size() == 1) {
    if (in != out) std::memcpy(out, in, bytes);
    return;
  }
  if (bytes <= ctx.shm->layout().small_bytes) {
    small_allreduce(ctx, in, out, count, dtype, op);
    return;
  }
  AllreducePlan plan(in, out, bytes, ctx.shm->size(), ctx.shm->rank(),
                     shm::call_piece_bytes(ctx.shm->layout(), bytes), -1);
  run_shm_pipeline(ctx, plan, dtype, op);
}

void shm_reduce(CollectiveContext& ctx, const void* send, void* recv, std::size_t count,
                DataType dtype, ReduceOp op, int root) {
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  const std::size_t bytes = count * dtype_size(dtype);
  if (ctx.shm->size() == 1) {
    if (bytes && in != out) std::memcpy(out, in, bytes);
    return;
  }
  AllreducePlan plan(in, out, bytes, ctx.shm->size(), ctx.shm->rank(),
                     shm::call_piece_bytes(ctx.shm->layout(), bytes), root);
  run_shm_pipeline(ctx, plan, dtype, op);
}

double shm_allreduce_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  return shm_estimate_us(m, team, bytes, 1.0);
}

extern const AlgorithmSpec shm_allreduce_spec{
    CollectiveKind::allreduce,
    "shm",
    "every rank reduces its share straight from the others' staged data in shared memory",
    needs_shared_memory,
    shm_allreduce_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
      shm_allreduce(ctx, c.send, c.recv, c.count, c.dtype, c.op);
    },
    /*one_verdict=*/true};

}  // namespace chorus
