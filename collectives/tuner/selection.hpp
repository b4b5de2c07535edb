// Algorithm selection: the user's override (CHORUS_ALGO) first, then the
// supported algorithm with the lowest estimate (tuner/cost_model.hpp); an
// algorithm that refuses the call (say, shared memory where the ranks span
// hosts) is skipped with its reason. The override grammar:
//
//   CHORUS_ALGO = entry (';' entry)*
//   entry       = collective ':' rule (',' rule)*
//   rule        = size '-' (size | 'inf') ':' algorithm      (sizes: 64K, 1M, ...)
//
// e.g. "allreduce:0-64K:recursive_doubling,64K-inf:ring". A rule covers calls
// of lo <= bytes < hi (CallShape::bytes: the largest buffer a rank moves).
// Sizes no rule covers, and calls the named algorithm refuses, fall back to
// the cost model. Collective and algorithm names are those of the registry;
// an unknown one fails when the override is parsed (at init).
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/core/contract.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {

struct AlgoRule {
  std::size_t lo = 0;
  std::size_t hi = SIZE_MAX;  // exclusive; SIZE_MAX means "inf"
  const AlgorithmSpec* algo = nullptr;
};

class AlgoOverride {
 public:
  AlgoOverride() = default;
  // Throws UsageError naming the bad part, or an algorithm unknown for the collective.
  static AlgoOverride parse(std::string_view text);
  // The overriding algorithm for (kind, bytes), if a rule covers it.
  const AlgorithmSpec* lookup(CollectiveKind kind, std::size_t bytes) const;
  bool empty() const { return rules_.empty(); }

 private:
  std::map<CollectiveKind, std::vector<AlgoRule>> rules_;
};

struct Candidate {
  const AlgorithmSpec* spec = nullptr;
  const char* refusal = nullptr;  // why it cannot run the call; null if it can
  double estimate_us = 0;
};

// What was chosen and why.
struct Selection {
  const AlgorithmSpec* spec = nullptr;
  uint8_t id = 0;                                   // CallSignature::algo
  bool forced = false;                              // CHORUS_ALGO chose it
  const AlgorithmSpec* refused_override = nullptr;  // CHORUS_ALGO's choice, which refused
  const char* override_refusal = nullptr;
  std::size_t bytes = 0;
  // Every algorithm of the collective, in registry order (filled when explained).
  std::vector<Candidate> candidates;
  std::string why() const;
};

// Chooses the algorithm for a call of `bytes` (CallShape::bytes) on `team`;
// with `explain`, keeps every candidate's estimate or refusal (for logs and
// chorus-info; it allocates, so the per-call path leaves it off). Throws
// UsageError(CHORUS_ERR_UNSUPPORTED) naming every refusal when no algorithm
// can run the call.
Selection select_algorithm(const CollectiveCall& call, std::size_t bytes, const Team& team,
                           const AlgoOverride& user, const CostModel& model, bool explain = false);

}  // namespace chorus

template <>
struct fmt::formatter<chorus::Selection> : fmt::formatter<std::string> {
  template <typename Context>
  auto format(const chorus::Selection& s, Context& ctx) const {
    return fmt::formatter<std::string>::format(s.why(), ctx);
  }
};
