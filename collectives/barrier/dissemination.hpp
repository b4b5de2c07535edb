// Dissemination barrier (Hensgen, Finkel and Manber 1988).
//
// Terms: n ranks; round k pairs rank r with r + 2^k (to) and r - 2^k (from),
// mod n (patterns::dissemination_*).
//
// Steps: ceil(log2 n) rounds. In round k rank r posts a receive from
// r - 2^k, sends to r + 2^k and waits for both. After round k a rank has
// heard, directly or through others, from the 2^(k+1) - 1 ranks before it,
// so after the last round every rank knows every other one has arrived.
//
// Bytes on the wire: none; ceil(log2 n) zero-byte messages per rank, each
// carrying the call signature (so a barrier against another call fails as a
// mismatch).
#pragma once

#include "collectives/context.hpp"

namespace chorus {

void dissemination_barrier(CollectiveContext& ctx);

}  // namespace chorus
