#include "collectives/verdict/plan.hpp"

#include "collectives/verdict/recover.hpp"

namespace chorus {

VerdictPlan plan_verdict(const Config& config, const CollectiveCall& call, const CallShape& shape,
                         bool one_verdict, bool commit_point, uint64_t round_bytes, int ranks) {
  if (config.agrees(round_bytes)) return {true};
  if (ranks <= 2 || (one_verdict && !commit_point)) return {};
  // Every rank's result is in place before the first release (registry.hpp):
  // a released rank's "finished" is all that the others need.
  if (commit_point)
    return config.keep_result_bytes ? VerdictPlan{false, std::span<std::byte>()} : VerdictPlan{};
  if (auto kept = replicated_result(call, shape, config.keep_result_bytes)) return {false, kept};
  if (one_verdict) return {};
  return {config.agree_min_bytes != Config::kAgreeNever};
}

const char* describe(const VerdictPlan& plan) {
  if (plan.round) return "round";
  return plan.keep ? "kept result" : "none";
}

}  // namespace chorus
