// Algorithm selection: the user's override (CHORUS_ALGO) first, then the
// default rule. The full cost model (steps * alpha + bytes / beta with
// calibrated link parameters) replaces the default rule later; the override
// grammar is already the final one:
//
//   CHORUS_ALGO = entry (';' entry)*
//   entry       = collective ':' rule (',' rule)*
//   rule        = size '-' (size | 'inf') ':' algorithm      (sizes: 64K, 1M, ...)
//
// e.g. "allreduce:0-64K:recursive_doubling,64K-inf:ring". A rule covers
// message sizes lo <= bytes < hi (per-rank buffer bytes). Sizes no rule covers
// fall back to the default rule.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/contract.hpp"

namespace chorus {

struct AlgoRule {
  std::size_t lo = 0;
  std::size_t hi = SIZE_MAX;  // exclusive; SIZE_MAX means "inf"
  std::string algo;
};

class AlgoOverride {
 public:
  AlgoOverride() = default;
  // Throws UsageError naming the bad part, or an algorithm unknown for the collective.
  static AlgoOverride parse(std::string_view text);
  // The overriding algorithm for (kind, bytes), or "" when none applies.
  std::string lookup(CollectiveKind kind, std::size_t bytes) const;
  bool empty() const { return rules_.empty(); }

 private:
  std::map<CollectiveKind, std::vector<AlgoRule>> rules_;
};

// Algorithms each collective has (the first is the default for large sizes).
const std::vector<std::string>& algorithms_for(CollectiveKind kind);

struct AlgoChoice {
  std::string algo;
  std::string why;
};

AlgoChoice choose_algorithm(CollectiveKind kind, std::size_t bytes, int ranks,
                            const AlgoOverride& user, std::size_t small_allreduce_max);

}  // namespace chorus
