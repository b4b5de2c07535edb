// A collective on a sub-team, run inside an algorithm of a larger team (the
// stages of the hierarchical algorithms).
#pragma once

#include <span>
#include <string_view>

#include "collectives/call.hpp"
#include "collectives/context.hpp"
#include "collectives/registry.hpp"

namespace chorus {

// Which teams of the hierarchy a stage runs on: the host-local team, or one
// between hosts (a lane, the leaders, the representatives). CHORUS_ALGO's
// and the tuning file's inner names (within=, across=) pick by it.
enum class StageRole { within, across };

// The collectives the hierarchical algorithm of `outer` runs as stages in
// `role` (what inner names are checked against); empty for a collective
// without one.
std::span<const CollectiveKind> stage_kinds(CollectiveKind outer, StageRole role);

// The algorithm `call` (of `bytes`, CallShape::bytes) gets on `team`: the
// algorithm named `inner` when it is one of the call's collective and does
// not refuse; otherwise as a call of its own would, the override of `outer`
// first, then its cost model.
const AlgorithmSpec& choose_on(const Hierarchy& outer, const Team& team, const CollectiveCall& call,
                               std::size_t bytes, std::string_view inner = {});

// Called with every stage's team and algorithm as it starts (tests observe
// the choice of inner algorithms with it); null: none. Set before calls run.
using StageObserver = void (*)(const Team& team, const CollectiveCall& call,
                               const AlgorithmSpec& algo);
void set_stage_observer(StageObserver observer);

// The estimate of the algorithm choose_on picks for a call of `kind` moving
// `bytes` on `team` (for the cost of a stage).
double stage_estimate_us(const Hierarchy& outer, const Team& team, CollectiveKind kind,
                         std::size_t bytes);

// The refusal of the hierarchical algorithms: a team without a Hierarchy
// (its ranks on one host, or a sub-team).
const char* needs_several_hosts(const Team& team, const CollectiveCall& call);

// Runs `call` on `team` with `ctx`'s signature, deadline, scratch and knobs;
// `role` and `outer_bytes` (the outer call's CallShape::bytes) find the
// inner name the outer call's choice gives its stages in that role.
// Every member of `team` makes the same sub-calls in the same order within
// the outer call, and the transports keep the order of one peer's messages on
// one tag, so the stages need no signatures of their own.
void run_on(CollectiveContext& ctx, const Team& team, const CollectiveCall& call, StageRole role,
            std::size_t outer_bytes);

}  // namespace chorus
