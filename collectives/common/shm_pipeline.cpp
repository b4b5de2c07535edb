#include "collectives/common/shm_pipeline.hpp"

#include <cmath>

#include <cstring>

#include "base/core/error.hpp"
#include "base/core/memcopy.hpp"
#include "collectives/common/scratch_slots.hpp"

namespace chorus {

shm::WaitSpec shm_wait_spec(CollectiveContext& ctx) {
  shm::WaitSpec spec;
  spec.deadline = ctx.deadline;
  spec.spin = ctx.shm && ctx.shm->spin() ? *ctx.shm->spin() : ctx.spin;
  spec.control = &ctx.transport;
  spec.call = &ctx.sig;
  spec.tag = ctx.tag;
  return spec;
}

void reduce_in_rank_order(std::byte* dst, std::span<const std::byte* const> srcs, std::size_t count,
                          DataType dtype, ReduceOp op) {
  CHORUS_CHECK(!srcs.empty(), "no inputs to reduce ({} elements)", count);
  if (count == 0) return;
  if (srcs.size() == 1) {
    if (dst != srcs[0]) std::memcpy(dst, srcs[0], count * dtype_size(dtype));
    return;
  }
  ReduceFn fn = reduce_fn(dtype, op);
  fn(dst, srcs[0], srcs[1], count);
  for (std::size_t i = 2; i < srcs.size(); ++i) fn(dst, dst, srcs[i], count);
  if (op == ReduceOp::avg) scale_for_avg(dst, count, dtype, static_cast<int>(srcs.size()));
}

void run_shm_pipeline(CollectiveContext& ctx, const ShmPlan& plan, DataType dtype, ReduceOp op) {
  CHORUS_CHECK(ctx.shm != nullptr, "{} on the shared-memory path without a domain", ctx.sig);
  shm::Domain& domain = *ctx.shm;
  const int n = domain.size();
  const int me = domain.rank();
  const uint64_t slots = static_cast<uint64_t>(domain.layout().slots);
  const std::size_t slot_bytes = domain.layout().slot_bytes();
  const std::size_t elem = dtype_size(dtype);
  const shm::WaitSpec spec = shm_wait_spec(ctx);
  domain.announce(ctx.sig);
  const uint64_t rounds = plan.rounds();
  const uint64_t first = domain.take_rounds(rounds);
  const bool streaming = plan.output_bytes() >= kStreamingMin && !plan.output_is_input();
  auto copy_out = [streaming](std::byte* dst, const std::byte* src, std::size_t bytes) {
    if (streaming)
      copy_streaming(dst, src, bytes);
    else
      std::memcpy(dst, src, bytes);
  };
  std::byte* reduced =
      plan.reduces()
          ? ctx.scratch.get(scratch_slot::shm_reduction, domain.layout().piece_bytes).data()
          : nullptr;
  std::vector<ShmStage> stages;
  std::vector<ShmGather> gathers;
  std::vector<ShmReduce> reductions;
  std::vector<const std::byte*> inputs(static_cast<std::size_t>(n));
  stages.reserve(static_cast<std::size_t>(n));
  gathers.reserve(static_cast<std::size_t>(n));
  reductions.reserve(1);

  // Waits for the round's slot to be free everywhere, stages, publishes.
  auto stage_round = [&](uint64_t b) {
    const uint64_t g = first + b;
    if (g >= slots) domain.wait_all(shm::Counter::drained, g - slots + 1, spec);
    std::byte* mine = domain.staging(me, g);
    stages.clear();
    plan.stage(b, stages);
    for (const ShmStage& s : stages) {
      CHORUS_CHECK(s.offset + s.bytes <= slot_bytes, "stage of {} bytes at {} in a {}-byte slot",
                   s.bytes, s.offset, slot_bytes);
      if (s.bytes) std::memcpy(mine + s.offset, s.src, s.bytes);
    }
    domain.publish(shm::Counter::staged, g + 1);
  };

  if (rounds > 0) stage_round(0);
  for (uint64_t b = 0; b < rounds; ++b) {
    const uint64_t g = first + b;
    std::byte* mine = domain.staging(me, g);
    domain.wait_all(shm::Counter::staged, g + 1, spec);
    if (b == 0) domain.check_announcements(ctx.sig);

    gathers.clear();
    plan.gather(b, gathers);
    if (plan.reduces()) {
      reductions.clear();
      plan.reduce(b, reductions);
      for (const ShmReduce& r : reductions) {
        if (r.bytes == 0) continue;
        CHORUS_CHECK(r.offset + r.bytes <= slot_bytes && r.bytes % elem == 0 &&
                         r.bytes <= domain.layout().piece_bytes,
                     "reduce of {} bytes at {} in a {}-byte slot", r.bytes, r.offset, slot_bytes);
        for (int j = 0; j < n; ++j)
          inputs[static_cast<std::size_t>(j)] =
              j == me && r.own ? r.own : domain.staging(j, g) + r.offset;
        if (plan.gathers_reduced() && r.own) {
          // Its own slot piece is not an input (its input is read in place):
          // reduce straight into it, where the others will gather from.
          reduce_in_rank_order(mine + r.offset, inputs, r.bytes / elem, dtype, op);
          if (r.dst) copy_out(r.dst, mine + r.offset, r.bytes);
        } else {
          reduce_in_rank_order(reduced, inputs, r.bytes / elem, dtype, op);
          if (plan.gathers_reduced()) std::memcpy(mine + r.offset, reduced, r.bytes);
          if (r.dst) copy_out(r.dst, reduced, r.bytes);
        }
      }
    }
    // Published every round, by every plan: the domain totals it.
    domain.publish(shm::Counter::reduced, g + 1);
    // Stage the next round while the others finish this one: its slot is
    // another one, and its input another block.
    if (b + 1 < rounds) stage_round(b + 1);
    if (plan.reduces() && plan.gathers_reduced())
      domain.wait_all(shm::Counter::reduced, g + 1, spec);
    for (const ShmGather& x : gathers) {
      CHORUS_CHECK(x.offset + x.bytes <= slot_bytes && x.from >= 0 && x.from < n,
                   "gather of {} bytes at {} from rank {}", x.bytes, x.offset, x.from);
      if (x.bytes) copy_out(x.dst, domain.staging(x.from, g) + x.offset, x.bytes);
    }
    domain.publish(shm::Counter::drained, g + 1);
  }
  if (streaming) streaming_fence();
}

double shm_estimate_us(const CostModel& m, const Team& team, std::size_t bytes,
                       double reduce_fraction) {
  if (team.size() == 1 || !team.shm_layout) return 0;
  const shm::Layout& layout = *team.shm_layout;
  const double b = static_cast<double>(bytes);
  const double reduce = reduce_fraction * b * m.reduce_us_per_byte;
  if (bytes <= layout.small_bytes) return m.shm_alpha_us + b * m.shm_us_per_byte + reduce;
  const double rounds = std::ceil(b / static_cast<double>(layout.slot_bytes()));
  return 3 * rounds * m.shm_alpha_us + 2 * b * m.shm_us_per_byte + reduce;
}

}  // namespace chorus
