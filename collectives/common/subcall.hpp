// A collective on a sub-team, run inside an algorithm of a larger team (the
// stages of the hierarchical algorithms).
#pragma once

#include "collectives/call.hpp"
#include "collectives/context.hpp"
#include "collectives/registry.hpp"

namespace chorus {

// The algorithm `call` (of `bytes`, CallShape::bytes) gets on `team` as a
// call of its own would: the override of `outer` first, then its cost model.
const AlgorithmSpec& choose_on(const Hierarchy& outer, const Team& team, const CollectiveCall& call,
                               std::size_t bytes);

// The estimate of the algorithm choose_on picks for a call of `kind` moving
// `bytes` on `team` (for the cost of a stage).
double stage_estimate_us(const Hierarchy& outer, const Team& team, CollectiveKind kind,
                         std::size_t bytes);

// The refusal of the hierarchical algorithms: a team without a Hierarchy
// (its ranks on one host, or a sub-team).
const char* needs_several_hosts(const Team& team, const CollectiveCall& call);

// Runs `call` on `team` with `ctx`'s signature, deadline, scratch and knobs.
// Every member of `team` makes the same sub-calls in the same order within
// the outer call, and the transports keep the order of one peer's messages on
// one tag, so the stages need no signatures of their own.
void run_on(CollectiveContext& ctx, const Team& team, const CollectiveCall& call);

}  // namespace chorus
