// The algorithm registry: every algorithm of every collective, each described
// once, in the file that implements it.
//
// An algorithm file defines `const AlgorithmSpec <name>_spec` and adds one
// line to the list in registry.cpp. Selection (tuner/selection.hpp), the
// CHORUS_ALGO override, chorus-info --plan and the call signature all read
// this list; nothing else names algorithms.
//
// Position: an algorithm's place in the list, + 1, is what the call
// signature records (CallSignature::algo), so ranks that chose differently
// fail as a mismatch. New algorithms go at the end of the list; moving one
// changes the wire contract between builds (ranks of one job run one build).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "base/core/contract.hpp"

namespace chorus {

struct Team;
struct CollectiveCall;
struct CallShape;
struct CollectiveContext;
struct CostModel;
struct WirePlan;  // allreduce/wire.hpp

struct AlgorithmSpec {
  CollectiveKind kind;
  std::string_view name;     // as CHORUS_ALGO and the logs spell it
  std::string_view summary;  // one sentence: what it does and when it wins
  // Why it cannot run `call` on `team` (nullptr: it can).
  const char* (*refusal)(const Team& team, const CollectiveCall& call);
  // Estimated microseconds of one call whose size is `bytes` (CallShape::bytes).
  double (*estimate_us)(const CostModel& model, const Team& team, std::size_t bytes);
  void (*run)(CollectiveContext& ctx, const CollectiveCall& call, const CallShape& shape);
  // A rank's death inside a call leaves every survivor with the same verdict
  // without the verdict round (collectives/verdict/plan.hpp): over shared
  // memory a dead rank's posted part stays readable, and the rooted
  // algorithms over a transport end with the root's confirmation.
  bool one_verdict = false;
  // That one verdict rests on a commit point (the root's release, or the
  // broadcast chain's last rank's), sent only once every rank's result is
  // in place (a non-root of reduce or gather has none; a scatter's block
  // and a broadcast's buffer came before the confirmations the release
  // waits for). A rank stopped whole (SIGSTOP) between the releases it
  // sends leaves some ranks released and the others timed out: those ask
  // the released ones, whose "finished" settles the call (plan.hpp).
  bool commit_point = false;
  // Allreduce: runs a call compressed on the wire (allreduce/wire.hpp) with
  // the conversions fused into the algorithm's own steps; null: the general
  // form converts each piece whole around run().
  void (*run_wire)(CollectiveContext& ctx, const CollectiveCall& call,
                   const WirePlan& plan) = nullptr;
  // Allreduce: run() takes a call whose buffers lie in parts
  // (CollectiveCall::scattered, collectives/scattered.hpp) and reads and
  // writes them where they lie; false: such a call is packed around run().
  bool takes_parts = false;
};

// Every algorithm, in registry order.
std::span<const AlgorithmSpec* const> algorithms();
// The algorithms of one collective, in registry order.
std::span<const AlgorithmSpec* const> algorithms_for(CollectiveKind kind);
// The algorithm of `kind` named `name`, or null.
const AlgorithmSpec* find_algorithm(CollectiveKind kind, std::string_view name);
// CallSignature::algo of an algorithm (1 + its position), and back.
uint8_t algorithm_id(const AlgorithmSpec& spec);
const AlgorithmSpec* algorithm_by_id(uint8_t id);

// Refusal helpers for specs.
const char* needs_shared_memory(const Team& team, const CollectiveCall& call);
const char* runs_anywhere(const Team& team, const CollectiveCall& call);

}  // namespace chorus
