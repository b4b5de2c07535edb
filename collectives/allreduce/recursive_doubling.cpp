// Recursive-doubling allreduce: the small-message algorithm.
//
// Terms (patterns/recursive_doubling.hpp): n ranks, p = largest power of two
// <= n, extra ranks r >= p paired with r - p, B = count * element size.
//
// Steps:
//   1. Fold: an extra rank sends its input to r - p, which reduces it in.
//   2. log2(p) rounds: core rank r swaps its whole current buffer with
//      r XOR 2^k and reduces. Both partners reduce the same two operands in
//      the same order (lower rank first), so every rank ends with the same bits.
//   3. AVG divides by n once, on every rank, identically.
//   4. Unfold: rank r < n - p sends the result to its extra rank r + p.
//
// Bytes on the wire per core rank: B * log2(p) (+ B in each direction for a
// rank with an extra partner); steps: log2(p) (+ 2 when n is not a power of
// two). Against the ring's 2(n-1) steps of B/n, it wins while latency, not
// bandwidth, dominates: small B.
#include "collectives/allreduce/recursive_doubling.hpp"

#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include <cstring>

#include "collectives/common/scratch_slots.hpp"
#include "collectives/patterns/recursive_doubling.hpp"

namespace chorus {

bool fold_extra_in(CollectiveContext& ctx, std::span<std::byte> buf, std::span<std::byte> staging,
                   std::size_t count, ReduceFn reduce) {
  const int rank = ctx.rank();
  const int extra = patterns::rd_extra_partner(rank, ctx.size());
  if (patterns::rd_is_extra(rank, ctx.size())) {
    auto s = ctx.send(extra, buf);
    ctx.wait(s);
    ctx.wait(ctx.recv(extra, buf));
    return true;
  }
  if (extra >= 0) {
    ctx.wait(ctx.recv(extra, staging.first(buf.size())));
    if (count > 0) reduce(buf.data(), buf.data(), staging.data(), count);  // rank < extra
  }
  return false;
}

void fold_extra_out(CollectiveContext& ctx, std::span<const std::byte> buf) {
  const int extra = patterns::rd_extra_partner(ctx.rank(), ctx.size());
  if (extra >= 0 && !patterns::rd_is_extra(ctx.rank(), ctx.size())) ctx.wait(ctx.send(extra, buf));
}

void recursive_doubling_allreduce(CollectiveContext& ctx, const void* send, void* recv,
                                  std::size_t count, DataType dtype, ReduceOp op) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const std::size_t bytes = count * dtype_size(dtype);
  auto* result = static_cast<std::byte*>(recv);
  if (send != recv && bytes > 0) std::memcpy(result, send, bytes);
  const std::span<std::byte> mine(result, bytes);
  const ReduceFn reduce = reduce_fn(dtype, op);
  std::span<std::byte> theirs = ctx.scratch.get(scratch_slot::small_exchange, bytes);
  // result = lower-ranked operand (op) higher-ranked operand.
  auto combine = [&](int partner) {
    if (count == 0) return;
    if (rank < partner)
      reduce(result, result, theirs.data(), count);
    else
      reduce(result, theirs.data(), result, count);
  };

  if (fold_extra_in(ctx, mine, theirs, count, reduce)) return;  // AVG applied by the partner
  for (int round = 0; round < patterns::rd_rounds(n); ++round) {
    const int partner = patterns::rd_round_partner(rank, round);
    RequestPtr requests[2] = {ctx.recv(partner, theirs), ctx.send(partner, mine)};
    ctx.wait(requests);
    combine(partner);
  }
  if (op == ReduceOp::avg && count > 0) scale_for_avg(result, count, dtype, n);
  fold_extra_out(ctx, mine);
}

// log2(p) full exchanges, at distances 1, 2, 4, ... (the first ones may stay
// inside the hosts), plus folding the extra ranks in and out.
double recursive_doubling_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  const int n = team.size();
  if (n == 1) return 0;
  const int p = patterns::pow2_floor(n);
  const int rounds = patterns::rd_rounds(n);
  const double b = static_cast<double>(bytes);
  const Placement& where = team.placement;
  // While the core ranks exchange, the extra ones wait asleep.
  const CostModel core = m.with_running_share(static_cast<double>(p) / n);
  double us = m.fold_in_and_out(where, n, p, b) + rounds * b * core.reduce_us_per_byte;
  for (int k = 0; k < rounds; ++k) us += core.exchange_round(where, k, b);
  return us;
}

extern const AlgorithmSpec recursive_doubling_allreduce_spec{
    CollectiveKind::allreduce,
    "recursive_doubling",
    "log2(n) rounds of whole-buffer exchanges: latency-optimal for small buffers",
    runs_anywhere,
    recursive_doubling_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
      recursive_doubling_allreduce(ctx, c.send, c.recv, c.count, c.dtype, c.op);
    }};

}  // namespace chorus
