// The ring allreduce's form for compression on the wire, with the
// conversions fused into its steps (the block at the top of wire_ring.cpp).
#pragma once

#include "collectives/allreduce/wire.hpp"
#include "collectives/context.hpp"

namespace chorus {

// Runs the compressed float32 allreduce `call` (plan_wire's `plan`) as a
// ring whose messages are in plan.wire; ctx.size() > 1.
void ring_wire_allreduce(CollectiveContext& ctx, const CollectiveCall& call, const WirePlan& plan);

}  // namespace chorus
