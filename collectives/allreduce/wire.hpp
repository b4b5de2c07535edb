// Compression on the wire for float32 allreduce (CHORUS_WIRE_DTYPE,
// CollectiveCall::wire, chorus_allreduce_ex): the float32 data travels as
// bfloat16 or float16, as Horovod's fp16 compression and DDP's bf16/fp16
// hooks do, but inside the runtime, so that every allreduce algorithm and
// transport carries half the bytes.
//
// Steps of one compressed call (all inside the call's turn, also for the
// non-blocking form), piece by piece of kWirePieceElements:
//   1. convert the piece of send (float32) into a pooled scratch buffer of
//      the wire dtype (scratch_slot::wire; rounds to nearest even);
//   2. run the chosen allreduce algorithm on that buffer in place with the
//      wire dtype: its reduce kernels widen to float32, reduce and round
//      back at every step (base/core/dtype.cpp); selection sees the wire
//      bytes of the whole call;
//   3. convert back into the piece of recv (float32); avg runs the
//      algorithm as sum and divides here, in float32 (one rounding fewer
//      than in the wire dtype).
// Every algorithm already gives every rank the same bits, and every rank
// cuts the same pieces, so the results are bit-identical across ranks.
// An algorithm may bring a form of its own (AlgorithmSpec::run_wire): the
// ring, the algorithm of large calls over a transport, runs wire_ring.hpp,
// the same arithmetic and pieces with the conversions fused into its steps.
//
// Pieces: the conversions are whole passes over memory, as expensive per
// byte as what loopback TCP saves (measured on 2 cores: at 16 MiB the two
// conversions took half the time of a compressed call). In pieces of 1 MiB
// of float32 the wire buffer stays in cache between conversion, transfer,
// reduction and conversion back: 16-64 MiB calls took 10-20% less time
// than converting the whole buffer at once, at the price of one
// algorithm's latency per piece (docs/architecture.md).
//
// Error (values of one sign; u = 2^-8 for bf16, 2^-11 for f16): each input
// is rounded once and each of the n - 1 partial sums on its path once, so
// |result - exact| <= ((1 + u)^n - 1) * |exact| (about n * u), plus 2^-24
// relative for avg's division; min/max: one rounding, u. f16 also needs
// every input and partial sum within its normal range (2^-14 to 65504).
//
// The contract: the signature keeps the user's dtype (float32) and op and
// records the wire dtype in CallSignature::layout (kWireLayout | wire), so a
// rank that compresses and one that does not (or one that passes bf16 data)
// fail as a mismatch that names both calls ("float32, sum, bfloat16 on the
// wire"). One rank: nothing travels, nothing is compressed.
#pragma once

#include <cstddef>
#include <optional>

#include "base/core/contract.hpp"
#include "base/core/dtype.hpp"
#include "collectives/call.hpp"
#include "collectives/context.hpp"
#include "collectives/registry.hpp"

namespace chorus {

// The wire dtype of `call` (validated) on `size` ranks when `configured` is
// CHORUS_WIRE_DTYPE's: bf16 or f16 when the call is compressed, else nullopt
// (not a float32 allreduce, one rank, or f32 / none asked).
std::optional<DataType> wire_dtype_of(const CollectiveCall& call,
                                      std::optional<DataType> configured, int size);

// A compressed call's plan: what the algorithm runs, and what ranks agree on.
struct WirePlan {
  DataType wire = DataType::bf16;
  CollectiveCall inner;  // the allreduce on the wire buffer (buffers set when it runs)
  CallShape shape;       // inner's shape: selection sees the bytes on the wire
  CallSignature sig;     // the user's call with the wire dtype in layout (seq, algo: later)
};
WirePlan plan_wire(const CollectiveCall& call, DataType wire, int size);

// Elements per piece (1 MiB of float32, 512 KiB on the wire).
inline constexpr std::size_t kWirePieceElements = std::size_t{1} << 18;

// Runs `algo` (chosen for plan.inner) for the compressed `call`: steps 1-3
// above, or algo.run_wire when it has one.
void run_wire_allreduce(CollectiveContext& ctx, const AlgorithmSpec& algo,
                        const CollectiveCall& call, const WirePlan& plan);

}  // namespace chorus
