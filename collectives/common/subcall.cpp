#include "collectives/common/subcall.hpp"

#include "base/core/log.hpp"
#include "collectives/tuner/selection.hpp"

namespace chorus {

const AlgorithmSpec& choose_on(const Hierarchy& outer, const Team& team, const CollectiveCall& call,
                               std::size_t bytes) {
  return *select_algorithm(call, bytes, team, *outer.user, *outer.model).spec;
}

double stage_estimate_us(const Hierarchy& outer, const Team& team, CollectiveKind kind,
                         std::size_t bytes) {
  CollectiveCall call;
  call.kind = kind;
  call.dtype = DataType::u8;
  call.count = bytes;
  return choose_on(outer, team, call, bytes).estimate_us(*outer.model, team, bytes);
}

const char* needs_several_hosts(const Team& team, const CollectiveCall&) {
  if (!team.hierarchy || team.hierarchy->hosts < 2) return "its ranks are on one host";
  return nullptr;
}

void run_on(CollectiveContext& ctx, const Team& team, const CollectiveCall& call) {
  static spdlog::logger& log = logger("coll");
  CHORUS_CHECK(ctx.team.hierarchy, "a sub-call on team {} outside a hierarchical call", team.name);
  const CallShape shape = validate(call, team.index, team.size());
  const AlgorithmSpec& algo = choose_on(*ctx.team.hierarchy, team, call, shape.bytes);
  log.debug("{} stage: {} of {} bytes on team {} ({} ranks): {}", ctx.team.name,
            collective_name(call.kind), shape.bytes, team.name, team.size(), algo.name);
  CollectiveContext sub = CollectiveContext::over(team, ctx.scratch, ctx.sig, ctx.deadline,
                                                  ctx.segment_bytes, ctx.spin);
  algo.run(sub, call, shape);
}

}  // namespace chorus
