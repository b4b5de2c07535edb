#include "collectives/common/subcall.hpp"

#include <atomic>
#include <chrono>

#include "base/core/log.hpp"
#include "collectives/tuner/selection.hpp"

namespace chorus {
namespace {

std::atomic<StageObserver> stage_observer{nullptr};

using K = CollectiveKind;
// What collectives/*/hierarchical.cpp run on each team; kept next to run_on,
// which every stage goes through.
constexpr K kAllreduceWithin[] = {K::reduce_scatterv, K::allgatherv};
constexpr K kAllreduceAcross[] = {K::allreduce};
constexpr K kBroadcastStage[] = {K::broadcast};
constexpr K kAllgatherWithin[] = {K::gather, K::broadcast};
constexpr K kAllgatherAcross[] = {K::allgatherv};

}  // namespace

std::span<const CollectiveKind> stage_kinds(CollectiveKind outer, StageRole role) {
  const bool within = role == StageRole::within;
  switch (outer) {
    case K::allreduce:
      return within ? std::span<const K>(kAllreduceWithin) : std::span<const K>(kAllreduceAcross);
    case K::broadcast:
      return kBroadcastStage;
    case K::allgather:
      return within ? std::span<const K>(kAllgatherWithin) : std::span<const K>(kAllgatherAcross);
    default:
      return {};
  }
}

void set_stage_observer(StageObserver observer) {
  stage_observer.store(observer);
}

const AlgorithmSpec& choose_on(const Hierarchy& outer, const Team& team, const CollectiveCall& call,
                               std::size_t bytes, std::string_view inner) {
  static spdlog::logger& log = logger("coll");
  if (!inner.empty()) {
    // A name of another stage collective of the same team (allgather's
    // within=linear fits its gather, not its broadcast) leaves this one to
    // selection.
    if (const AlgorithmSpec* named = find_algorithm(call.kind, inner)) {
      const char* refusal = named->refusal(team, call);
      if (!refusal) return *named;
      // Once per process at info (it would repeat every call); debug after.
      static std::atomic<bool> told{false};
      log.log(told.exchange(true) ? spdlog::level::debug : spdlog::level::info,
              "stage {} on team {}: the inner algorithm {} refused ({}); choosing by selection",
              collective_name(call.kind), team.name, inner, refusal);
    }
  }
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

void run_on(CollectiveContext& ctx, const Team& team, const CollectiveCall& call, StageRole role,
            std::size_t outer_bytes) {
  static spdlog::logger& log = logger("coll");
  CHORUS_CHECK(ctx.team.hierarchy, "a sub-call on team {} outside a hierarchical call", team.name);
  const Hierarchy& h = *ctx.team.hierarchy;
  const CallShape shape = validate(call, team.index, team.size());
  // The outer call's choice is found again from what every rank knows (the
  // algorithm in its signature, its size and team), so the inner names need
  // no path of their own from selection to here.
  std::string_view inner;
  if (const AlgorithmSpec* outer = algorithm_by_id(ctx.sig.algo))
    if (const AlgoChoice* c = h.user->choice_of(*outer, outer_bytes, *h.world))
      inner = role == StageRole::within ? c->within : c->across;
  const AlgorithmSpec& algo = choose_on(h, team, call, shape.bytes, inner);
  if (StageObserver observe = stage_observer.load()) observe(team, call, algo);
  log.debug("{} stage: {} of {} bytes on team {} ({} ranks): {}", ctx.team.name,
            collective_name(call.kind), shape.bytes, team.name, team.size(), algo.name);
  CollectiveContext sub = CollectiveContext::over(team, ctx.scratch, ctx.sig, ctx.deadline,
                                                  ctx.segment_bytes, ctx.spin);
  if (!log.should_log(spdlog::level::trace)) return algo.run(sub, call, shape);
  const auto start = std::chrono::steady_clock::now();
  algo.run(sub, call, shape);
  log.trace("{} stage: {} on team {} took {} us", ctx.team.name, collective_name(call.kind),
            team.name,
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                .count());
}

}  // namespace chorus
