#include "collectives/allreduce/shm.hpp"

#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <vector>

#include "collectives/common/scratch_slots.hpp"
#include "collectives/common/shm_pipeline.hpp"

namespace chorus {
namespace {

// The call's input and output: one buffer each, or parts.
struct CallBuffers {
  const std::byte* in = nullptr;
  std::byte* out = nullptr;
  const ScatteredBuffers* parts = nullptr;

  bool in_place() const { return parts ? parts->in_place() : in == out; }
  // fn(in, out, bytes) for each stretch of bytes [start, start + bytes) that
  // lies in one buffer.
  template <typename Fn>
  void for_each(std::size_t start, std::size_t bytes, Fn&& fn) const {
    if (!parts) {
      if (bytes) fn(in + start, out + start, bytes);
      return;
    }
    parts->for_each(start, bytes, fn);
  }
  // Bytes [start, start + bytes) when one buffer holds them all (else nulls).
  ScatteredBuffers::Part within(std::size_t start, std::size_t bytes) const {
    if (!parts) return {in + start, out + start, bytes};
    return parts->within(start, bytes);
  }
};

// Rank j reduces piece j of every round across all ranks' inputs; then every
// rank (allreduce, root < 0) or the root alone (reduce) copies the reduced
// pieces out.
class AllreducePlan final : public ShmPlan {
 public:
  AllreducePlan(const CallBuffers& buffers, std::size_t total, int ranks, int me, std::size_t piece,
                int root)
      : buffers_(buffers), total_(total), ranks_(ranks), me_(me), piece_(piece), root_(root) {}

  std::size_t output_bytes() const override { return receives() ? total_ : 0; }
  bool output_is_input() const override { return buffers_.in_place(); }
  uint64_t rounds() const override { return (total_ + block() - 1) / block(); }
  // Every piece but its own, which it reduces straight from its input.
  void stage(uint64_t b, std::vector<ShmStage>& out) const override {
    for (int j = 0; j < ranks_; ++j) {
      if (j == me_) continue;
      auto [start, bytes] = piece_of(b, j);
      std::size_t offset = slot_offset(j);
      buffers_.for_each(start, bytes, [&](const std::byte* in, std::byte*, std::size_t n) {
        out.push_back({in, offset, n});
        offset += n;
      });
    }
  }
  bool reduces() const override { return true; }
  bool gathers_reduced() const override { return true; }
  void reduce(uint64_t b, std::vector<ShmReduce>& out) const override {
    auto [start, bytes] = piece_of(b, me_);
    std::size_t offset = slot_offset(me_);
    buffers_.for_each(start, bytes, [&](const std::byte* in, std::byte* dst, std::size_t n) {
      out.push_back({offset, receives() ? dst : nullptr, n, in});
      offset += n;
    });
  }
  void gather(uint64_t b, std::vector<ShmGather>& out) const override {
    if (!receives()) return;
    for (int j = 0; j < ranks_; ++j) {
      if (j == me_) continue;
      auto [start, bytes] = piece_of(b, j);
      std::size_t offset = slot_offset(j);
      buffers_.for_each(start, bytes, [&](const std::byte*, std::byte* dst, std::size_t n) {
        out.push_back({j, offset, dst, n});
        offset += n;
      });
    }
  }

 private:
  bool receives() const { return root_ < 0 || me_ == root_; }
  std::size_t block() const { return piece_ * static_cast<std::size_t>(ranks_); }
  std::size_t slot_offset(int j) const { return static_cast<std::size_t>(j) * piece_; }
  // Where rank j's piece of round b lies in the buffer, and its length.
  std::pair<std::size_t, std::size_t> piece_of(uint64_t b, int j) const {
    std::size_t start = b * block() + slot_offset(j);
    return {start, start < total_ ? std::min(piece_, total_ - start) : 0};
  }
  CallBuffers buffers_;
  std::size_t total_;
  int ranks_, me_;
  std::size_t piece_;
  int root_;
};

void small_allreduce(CollectiveContext& ctx, const CallBuffers& buffers, std::size_t count,
                     DataType dtype, ReduceOp op) {
  shm::Domain& domain = *ctx.shm;
  const std::size_t bytes = count * dtype_size(dtype);
  const shm::WaitSpec spec = shm_wait_spec(ctx);
  // Announced for the waits of ranks in another kind of call; this path's
  // own check is the signature digest in each rank's mail header.
  domain.announce(ctx.sig);
  const uint64_t call = domain.take_mail_call();
  std::byte* mail = domain.small_buffer(domain.rank(), call);
  buffers.for_each(0, bytes, [&](const std::byte* in, std::byte*, std::size_t n) {
    std::memcpy(mail, in, n);
    mail += n;
  });
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
  if (std::byte* out = buffers.within(0, bytes).recv) {
    reduce_in_rank_order(out, inputs, count, dtype, op);
    return;
  }
  std::byte* reduced = ctx.scratch.get(scratch_slot::shm_reduction, bytes).data();
  reduce_in_rank_order(reduced, inputs, count, dtype, op);
  buffers.for_each(0, bytes, [&](const std::byte*, std::byte* out, std::size_t part) {
    std::memcpy(out, reduced, part);
    reduced += part;
  });
}

void allreduce(CollectiveContext& ctx, const CallBuffers& buffers, std::size_t count,
               DataType dtype, ReduceOp op) {
  const std::size_t bytes = count * dtype_size(dtype);
  if (bytes == 0) return;
  if (ctx.shm->size() == 1) {
    buffers.for_each(0, bytes, [](const std::byte* in, std::byte* out, std::size_t n) {
      if (in != out) std::memcpy(out, in, n);
    });
    return;
  }
  if (bytes <= ctx.shm->layout().small_bytes) {
    small_allreduce(ctx, buffers, count, dtype, op);
    return;
  }
  AllreducePlan plan(buffers, bytes, ctx.shm->size(), ctx.shm->rank(),
                     shm::call_piece_bytes(ctx.shm->layout(), bytes), -1);
  run_shm_pipeline(ctx, plan, dtype, op);
}

}  // namespace

void shm_allreduce(CollectiveContext& ctx, const void* send, void* recv, std::size_t count,
                   DataType dtype, ReduceOp op) {
  allreduce(ctx, {static_cast<const std::byte*>(send), static_cast<std::byte*>(recv)}, count, dtype,
            op);
}

void shm_allreduce_parts(CollectiveContext& ctx, const ScatteredBuffers& parts, std::size_t count,
                         DataType dtype, ReduceOp op) {
  allreduce(ctx, {nullptr, nullptr, &parts}, count, dtype, op);
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
  AllreducePlan plan({in, out}, bytes, ctx.shm->size(), ctx.shm->rank(),
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
      if (c.scattered)
        shm_allreduce_parts(ctx, *c.scattered, c.count, c.dtype, c.op);
      else
        shm_allreduce(ctx, c.send, c.recv, c.count, c.dtype, c.op);
    },
    /*one_verdict=*/true,
    /*commit_point=*/false,
    /*run_wire=*/nullptr,
    /*takes_parts=*/true};

}  // namespace chorus
