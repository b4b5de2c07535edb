// Algorithm selection: the user's override (CHORUS_ALGO) first, then the
// supported algorithm with the lowest estimate (tuner/cost_model.hpp); an
// algorithm that refuses the call (say, shared memory where the ranks span
// hosts) is skipped with its reason. The override grammar:
//
//   CHORUS_ALGO = entry (';' entry)*
//   entry       = collective ':' rule (',' rule)*
//   rule        = size '-' (size | 'inf') ':' choice         (sizes: 64K, 1M, ...)
//   choice      = algorithm | 'hierarchical(' inner (',' inner)* ')'
//   inner       = ('within' | 'across') '=' algorithm
//
// e.g. "allreduce:0-64K:recursive_doubling,64K-inf:ring" or
// "allreduce:0-inf:hierarchical(within=shm,across=rabenseifner)". A rule
// covers calls of lo <= bytes < hi (CallShape::bytes: the largest buffer a
// rank moves). Sizes no rule covers, and calls the named algorithm refuses,
// fall back to a tuning file's entry (CHORUS_TUNING_FILE,
// tuner/tuning_file.hpp), then to the cost model. Collective and algorithm
// names are those of the registry; an unknown one fails when the override is
// parsed (at init). Inner names pick the algorithm of a hierarchical
// algorithm's stages: `within` those on the host-local team, `across` those
// between hosts (lanes, leaders); a name must belong to one of the stage
// collectives of that team (common/subcall.hpp), and a stage it cannot run
// (another collective, or a refusal) is chosen as a call of its own.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/core/contract.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {

struct TuningTable;  // tuner/tuning_file.hpp
struct TuningEntry;

// An algorithm as CHORUS_ALGO or a tuning file names it, with the inner
// algorithms of a hierarchical one (empty: its stages choose as calls of
// their own). The names point into the registry.
struct AlgoChoice {
  const AlgorithmSpec* algo = nullptr;
  std::string_view within;
  std::string_view across;
  // "ring", "hierarchical(within=shm,across=ring)".
  std::string name() const;
  // Parses `choice` of the grammar above for `kind`; throws UsageError
  // prefixed with `what` (the setting or file) naming the bad part.
  static AlgoChoice parse(CollectiveKind kind, std::string_view text, std::string_view what);
};

struct AlgoRule {
  std::size_t lo = 0;
  std::size_t hi = SIZE_MAX;  // exclusive; SIZE_MAX means "inf"
  AlgoChoice choice;
};

class AlgoOverride {
 public:
  AlgoOverride() = default;
  // Throws UsageError naming the bad part, or an algorithm unknown for the collective.
  static AlgoOverride parse(std::string_view text);
  // The overriding algorithm for (kind, bytes), if a rule covers it.
  const AlgorithmSpec* lookup(CollectiveKind kind, std::size_t bytes) const;
  const AlgoChoice* lookup_choice(CollectiveKind kind, std::size_t bytes) const;
  // The measured choices of CHORUS_TUNING_FILE, consulted after the rules.
  void set_tuning(std::shared_ptr<const TuningTable> table) { tuning_ = std::move(table); }
  const TuningTable* tuning() const { return tuning_.get(); }
  // The choice (rule, else tuning entry) that covers a call of `bytes` on
  // `team` and names `running`: where a hierarchical algorithm's stages find
  // their inner names. Null when neither does (the cost model chose it).
  const AlgoChoice* choice_of(const AlgorithmSpec& running, std::size_t bytes,
                              const Team& team) const;
  bool empty() const { return rules_.empty() && !tuning_; }

 private:
  std::map<CollectiveKind, std::vector<AlgoRule>> rules_;
  std::shared_ptr<const TuningTable> tuning_;
};

// The collective named `name` (send excluded); throws UsageError prefixed
// with `what` for another.
CollectiveKind parse_collective(std::string_view name, std::string_view what);

// The host count a tuning entry is matched against: the hierarchy's, 1 for a
// team on one host, 0 (matches nothing) for a team across hosts without one.
int hosts_of(const Team& team);

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
  const AlgoChoice* choice = nullptr;               // the rule or entry that chose it
  const TuningEntry* tuned = nullptr;               // the tuning file chose it
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
