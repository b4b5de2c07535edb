// How a call reaches one verdict on every rank if a rank dies inside it:
// the choice, per call, between the algorithm alone, a kept result
// (recover.hpp) and the verdict round (agree.hpp).
//
// Terms:
//   split       one survivor finishes a call that another fails: the
//               victim gave the first all it needed and not the second
//   one verdict an algorithm that cannot split (AlgorithmSpec::one_verdict:
//               shared memory keeps a dead rank's posted part readable;
//               the rooted algorithms end with the root's confirmation)
//   keep        a replicated result (recover.hpp) copied aside, so that a
//               survivor that failed the call takes a finisher's result
//   round       the verdict round after the algorithm (agree.hpp)
//
// Steps, per call (CHORUS_AGREE is A, CHORUS_KEEP_RESULT is K):
//   1. calls of at least A bytes take the round (1: every call);
//   2. communicators of two ranks, and one-verdict algorithms, need
//      nothing more: one survivor has no one to split with (a deadline
//      is settled by the asks of CollectiveContext::wait and the gate,
//      mark_part_done, that every call passes); but a one verdict that
//      rests on a commit point (AlgorithmSpec::commit_point) keeps an
//      empty result, for a releaser stopped whole: every rank's result is
//      in place before the first release, so a rank that timed out waiting
//      for its release needs only a released rank's "finished" (any size,
//      any of the rooted collectives; none with K = 0);
//   3. replicated calls whose result is in host memory and at most K bytes
//      keep their result;
//   4. every other call takes the round, unless A is 0 (the user chose
//      speed over one verdict): reduce-scatter and alltoall over a
//      transport, replicated results larger than K, device buffers.
// Bytes on the wire: the round's n - 1 zero-byte messages per rank, or
// none for a kept result on a call that succeeds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "base/core/config.hpp"
#include "collectives/call.hpp"

namespace chorus {

struct VerdictPlan {
  bool round = false;                             // agree_on_verdict after the algorithm
  std::optional<std::span<std::byte>> keep = {};  // where the result to keep lies
};

// `round_bytes`: the bytes the round's size compares (the call on the wire:
// a compressed allreduce's wire dtype); `ranks`: the communicator's size.
VerdictPlan plan_verdict(const Config& config, const CollectiveCall& call, const CallShape& shape,
                         bool one_verdict, bool commit_point, uint64_t round_bytes, int ranks);

// "round", "kept result", or "none" (for the debug log of a choice).
const char* describe(const VerdictPlan& plan);

}  // namespace chorus
