// Rabenseifner's allreduce: recursive-halving reduce-scatter, then
// recursive-doubling allgather (MPICH's long-message allreduce).
//
// Terms (patterns/recursive_doubling.hpp): n ranks, p = largest power of two
// <= n, core ranks 0..p-1, extra ranks r >= p paired with r - p; the N-element
// buffer is cut into p balanced chunks (patterns::chunk); B = N * elem.
//
// Steps:
//   1. Fold (n not a power of two): an extra rank sends its input to r - p,
//      which reduces it in (allreduce/recursive_doubling.hpp: fold_extra_in).
//   2. Reduce-scatter, log2(p) halving rounds: in round k core rank r pairs
//      with r XOR w (w = p >> (k + 1)), keeps its window of w chunks and sends
//      the partner's: B/2, B/4, ... B/p. The kept half is reduced as its
//      segments arrive, lower rank first (lower op higher). Afterwards rank r
//      holds chunk r reduced over all ranks; it is the only rank that computes
//      it, so every rank ends with the same bits. AVG: the owner divides it by
//      n, once.
//   3. Allgather, log2(p) doubling rounds: rank r swaps its window of 2^k
//      chunks with r XOR 2^k's, straight into the result.
//   4. Unfold: rank r < n - p sends the result to its extra rank r + p.
// Every exchange is pipelined in segments of ctx.segment_bytes
// (common/exchange.hpp). A large call may run as steps 1-4 once per round
// of the buffer (ctx.ring_round_bytes, common/slices.hpp), as the ring does.
//
// In parts (CollectiveCall::scattered, collectives/scattered.hpp): the same
// messages, read and written where the parts lie (common/parts_io.hpp).
// Sends read the outputs as gather sends, packed into scratch where the
// transport cannot gather; the halving rounds' segments are reduced from
// staging into the outputs; the doubling rounds' and the unfold's land in
// the outputs by scatter receives, or are staged and copied where the
// transport cannot scatter. Over TCP that is no copy of its own, against
// two of the whole call for packing it around the algorithm.
//
// Bytes on the wire per core rank: 2 (p - 1) / p * B sent and received, in
// 2 log2(p) rounds (+ B each way and 2 rounds when n is not a power of two):
// the ring's bandwidth in log2(p) rather than n - 1 steps. N < p leaves some
// chunks empty (empty messages); N = 0 and n = 1 work.
#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include <cstring>

#include "base/core/log.hpp"
#include "collectives/allreduce/recursive_doubling.hpp"
#include "collectives/common/exchange.hpp"
#include "collectives/common/parts_io.hpp"
#include "collectives/common/scratch_slots.hpp"
#include "collectives/common/slices.hpp"
#include "collectives/patterns/recursive_doubling.hpp"
#include "collectives/patterns/ring.hpp"

namespace chorus {

namespace {

using patterns::Range;

// Step 2's round k on core rank `rank` of p: its partner, the partner's
// window to send, its own to keep and reduce into.
Exchange halving_round(std::span<const Range> chunks, int rank, int p, int k, std::size_t e) {
  const int w = patterns::rh_width(p, k);
  Exchange x;
  x.peer = rank ^ w;
  x.elem_size = e;
  x.out = patterns::window_range(chunks, patterns::window_of(x.peer, w));
  x.in = patterns::window_range(chunks, patterns::window_of(rank, w));
  return x;
}

// Step 3's round k: its partner, its own window to send, the partner's to receive.
Exchange doubling_round(std::span<const Range> chunks, int rank, int k, std::size_t e) {
  Exchange x;
  x.peer = patterns::rd_round_partner(rank, k);
  x.elem_size = e;
  x.out = patterns::window_range(chunks, patterns::window_of(rank, 1 << k));
  x.in = patterns::window_range(chunks, patterns::window_of(x.peer, 1 << k));
  return x;
}

// One whole allreduce (steps 1-4) of `count` elements.
void rabenseifner_whole(CollectiveContext& ctx, const void* send, void* recv, std::size_t count,
                        DataType dtype, ReduceOp op) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const std::size_t e = dtype_size(dtype);
  const std::size_t bytes = count * e;
  auto* result = static_cast<std::byte*>(recv);
  if (send != recv && bytes > 0) std::memcpy(result, send, bytes);
  const std::span<std::byte> mine(result, bytes);
  const ReduceFn reduce = reduce_fn(dtype, op);
  // The fold's staging holds B; a halving round's at most B / 2.
  std::span<std::byte> staging = ctx.scratch.get(scratch_slot::small_exchange, bytes);
  if (fold_extra_in(ctx, mine, staging, count, reduce)) return;  // AVG applied by the partner

  const int p = patterns::pow2_floor(n);
  const int rounds = patterns::rd_rounds(n);
  const auto chunks = patterns::balanced_chunks(count, p);
  for (int k = 0; k < rounds; ++k) {
    Exchange x = halving_round(chunks, rank, p, k, e);
    const int partner = x.peer;
    x.out_base = result;
    x.in_base = staging.data();
    x.landed = [&](Range seg, std::byte* theirs) {
      std::byte* own = result + seg.offset * e;
      if (seg.count == 0) return;
      if (rank < partner)
        reduce(own, own, theirs, seg.count);
      else
        reduce(own, theirs, own, seg.count);
    };
    run_exchange(ctx, x);
  }
  const Range own = chunks[static_cast<std::size_t>(rank)];
  if (op == ReduceOp::avg && own.count > 0)
    scale_for_avg(result + own.offset * e, own.count, dtype, n);
  for (int k = 0; k < rounds; ++k) {
    Exchange x = doubling_round(chunks, rank, k, e);
    x.out_base = result;
    x.in_base = result + x.in.offset * e;
    run_exchange(ctx, x);
  }
  fold_extra_out(ctx, mine);
}

// Steps 1-4 over `count` elements of the parts from byte `base`: the same
// messages as rabenseifner_whole's, read and written where the parts lie.
// Sends read the outputs (gathered, or packed where the transport cannot);
// received segments are reduced from staging into the outputs, and the
// allgather's and the unfold's land straight in them (scatter receives,
// else staged and copied).
void rabenseifner_parts_whole(CollectiveContext& ctx, const ScatteredBuffers& parts,
                              std::size_t base, std::size_t count, DataType dtype, ReduceOp op) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const std::size_t e = dtype_size(dtype);
  const Range all{0, count};
  auto stretches = [&](Range r, auto&& fn) {
    parts.for_each(base + r.offset * e, r.count * e, fn);
  };
  if (!parts.in_place())
    stretches(all, [](const std::byte* in, std::byte* out, std::size_t b) {
      if (in != out) std::memcpy(out, in, b);
    });
  if (n == 1) return;
  const ReduceFn reduce = reduce_fn(dtype, op);
  std::byte* staging = ctx.scratch.get(scratch_slot::small_exchange, count * e).data();
  // theirs into the outputs of r, the lower rank's operand first.
  auto reduce_into = [&](Range r, const std::byte* theirs, bool mine_first) {
    stretches(r, [&](const std::byte*, std::byte* out, std::size_t b) {
      if (mine_first)
        reduce(out, out, theirs, b / e);
      else
        reduce(out, theirs, out, b / e);
      theirs += b;
    });
  };
  // Sends of segments of `window` of the outputs to `peer`.
  auto sender = [&](int peer, Range window) {
    std::byte* packed = ctx.gathers_sends(peer)
                            ? nullptr
                            : ctx.scratch.get(scratch_slot::parts_packed, window.count * e).data();
    return [&ctx, &parts, peer, packed, window, base, e](Range seg) {
      return send_parts(ctx, peer, parts, false, base + seg.offset * e, seg.count * e,
                        packed ? packed + (seg.offset - window.offset) * e : nullptr);
    };
  };
  // x's received segments into place in the outputs: scattered, or staged
  // at `staging` (x.in's start) and copied.
  auto receiver = [&](Exchange& x) {
    if (ctx.scatters_recvs(x.peer)) {
      x.recv_placed = [&ctx, &parts, peer = x.peer, base, e](Range seg) {
        return recv_parts(ctx, peer, parts, base + seg.offset * e, seg.count * e);
      };
    } else {
      x.in_base = staging;
      x.landed = [&parts, base, e](Range seg, std::byte* data) {
        parts.unpack(base + seg.offset * e, seg.count * e, data);
      };
    }
  };

  // Step 1 (fold_extra_in's messages).
  const int extra = patterns::rd_extra_partner(rank, n);
  if (patterns::rd_is_extra(rank, n)) {
    ctx.wait(sender(extra, all)(all));
    if (ctx.scatters_recvs(extra)) {  // the result
      ctx.wait(recv_parts(ctx, extra, parts, base, count * e));
    } else {
      ctx.wait(ctx.recv(extra, {staging, count * e}));
      parts.unpack(base, count * e, staging);
    }
    return;  // AVG applied by the partner
  }
  if (extra >= 0) {
    ctx.wait(ctx.recv(extra, {staging, count * e}));
    reduce_into(all, staging, true);  // rank < extra
  }

  const int p = patterns::pow2_floor(n);
  const int rounds = patterns::rd_rounds(n);
  const auto chunks = patterns::balanced_chunks(count, p);
  for (int k = 0; k < rounds; ++k) {
    Exchange x = halving_round(chunks, rank, p, k, e);
    const bool mine_first = rank < x.peer;
    x.send_placed = sender(x.peer, x.out);
    x.in_base = staging;
    x.landed = [&](Range seg, std::byte* theirs) { reduce_into(seg, theirs, mine_first); };
    run_exchange(ctx, x);
  }
  if (op == ReduceOp::avg)
    stretches(chunks[static_cast<std::size_t>(rank)],
              [&](const std::byte*, std::byte* out, std::size_t b) {
                scale_for_avg(out, b / e, dtype, n);
              });
  for (int k = 0; k < rounds; ++k) {
    Exchange x = doubling_round(chunks, rank, k, e);
    x.send_placed = sender(x.peer, x.out);
    receiver(x);
    run_exchange(ctx, x);
  }
  if (extra >= 0) ctx.wait(sender(extra, all)(all));  // step 4 (fold_extra_out's message)
}

// Steps 1-4 once per round of the buffer (patterns::ring_round_elems) when
// ctx.ring_round_bytes asks for rounds, else once.
// (In parts when `parts` is set: send and recv are then unused.)
void rabenseifner_allreduce(CollectiveContext& ctx, const void* send, void* recv, std::size_t count,
                            DataType dtype, ReduceOp op, const ScatteredBuffers* parts) {
  static spdlog::logger& log = logger("coll");
  const std::size_t e = dtype_size(dtype);
  const std::size_t round = patterns::ring_round_elems(count, e, ctx.ring_round_bytes);
  log.debug(
      "rabenseifner allreduce{}: {} ranks, count {} ({}, {}), segment {} bytes, rounds of {} "
      "elements",
      parts ? fmt::format(" in {} parts", parts->size()) : "", ctx.size(), count, dtype_name(dtype),
      op_name(op), ctx.segment_bytes, round);
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  for_each_slice(count, round, [&](std::size_t at, std::size_t m) {
    if (parts)
      rabenseifner_parts_whole(ctx, *parts, at * e, m, dtype, op);
    else
      rabenseifner_whole(ctx, in + at * e, out + at * e, m, dtype, op);
  });
}

// 2 log2(p) steps moving 2 (p - 1) / p * B, (p - 1) / p * B reduced; the fold
// and unfold add two steps of B and one reduction of B.
double rabenseifner_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  const int n = team.size();
  if (n == 1) return 0;
  const int p = patterns::pow2_floor(n);
  const int rounds = patterns::rd_rounds(n);
  const double b = static_cast<double>(bytes), share = static_cast<double>(p - 1) / p;
  // The round at distance 2^k moves B 2^k / p each way, twice (halving, then
  // doubling); the short distances may stay inside the hosts.
  const Placement& where = team.placement;
  const CostModel core = m.with_running_share(static_cast<double>(p) / n);
  double us = m.fold_in_and_out(where, n, p, b) + share * b * core.reduce_us_per_byte;
  for (int k = 0; k < rounds; ++k)
    us += 2 * core.exchange_round(where, k, b * static_cast<double>(1 << k) / p);
  return us;
}

}  // namespace

extern const AlgorithmSpec rabenseifner_allreduce_spec{
    CollectiveKind::allreduce,
    "rabenseifner",
    "recursive-halving reduce-scatter then recursive-doubling allgather: the ring's bytes in "
    "2 log2(n) steps",
    runs_anywhere,
    rabenseifner_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
      rabenseifner_allreduce(ctx, c.send, c.recv, c.count, c.dtype, c.op, c.scattered);
    },
    /*one_verdict=*/false,
    /*commit_point=*/false,
    /*run_wire=*/nullptr,
    /*takes_parts=*/true};

}  // namespace chorus
