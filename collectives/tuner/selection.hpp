// Algorithm selection: the user's override (CHORUS_ALGO) first, then the
// cheapest algorithm by a cost model (steps * alpha + bytes / beta + reduced
// bytes * gamma). The override grammar:
//
//   CHORUS_ALGO = entry (';' entry)*
//   entry       = collective ':' rule (',' rule)*
//   rule        = size '-' (size | 'inf') ':' algorithm      (sizes: 64K, 1M, ...)
//
// e.g. "allreduce:0-64K:recursive_doubling,64K-inf:ring". A rule covers
// message sizes lo <= bytes < hi (per-rank buffer bytes). Sizes no rule covers
// fall back to the cost model.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/core/contract.hpp"

namespace chorus {

// Every algorithm of every collective; the names are those of CHORUS_ALGO.
// An enum, not a string: the choice is made on every call.
enum class Algorithm : uint8_t { ring, recursive_doubling, dissemination, shm };
std::string_view algorithm_name(Algorithm algo);

struct AlgoRule {
  std::size_t lo = 0;
  std::size_t hi = SIZE_MAX;  // exclusive; SIZE_MAX means "inf"
  Algorithm algo = Algorithm::ring;
};

class AlgoOverride {
 public:
  AlgoOverride() = default;
  // Throws UsageError naming the bad part, or an algorithm unknown for the collective.
  static AlgoOverride parse(std::string_view text);
  // The overriding algorithm for (kind, bytes), if a rule covers it.
  std::optional<Algorithm> lookup(CollectiveKind kind, std::size_t bytes) const;
  bool empty() const { return rules_.empty(); }

 private:
  std::map<CollectiveKind, std::vector<AlgoRule>> rules_;
};

// Algorithms each collective has (the first is the default for large sizes).
std::span<const Algorithm> algorithms_for(CollectiveKind kind);

struct AlgoChoice {
  Algorithm algo = Algorithm::ring;
  // Why, in numbers (words only when logged: see the formatter below).
  bool forced = false;       // CHORUS_ALGO said so
  bool shm_refused = false;  // CHORUS_ALGO said shm, but there is no shared-memory domain
  std::size_t bytes = 0;
  int ranks = 0;
  double alpha_us = 0, ring_us = 0, recursive_doubling_us = 0;
  std::string why() const;
};

// The cost model: a message step costs alpha, every byte on the critical path
// 1/beta, every byte reduced gamma. Until measured link parameters arrive
// (calibration data), defaults() gives what loopback TCP shows on these
// machines: alpha grows when ranks outnumber cores, because then every step
// waits for a sleeping rank to be scheduled.
struct CostModel {
  double alpha_us = 10;                // per message step
  double us_per_byte = 0.0004;         // 1/beta: ~2.5 GB/s
  double reduce_us_per_byte = 0.0002;  // gamma: ~5 GB/s
  bool oversubscribed = false;         // more ranks on this host than cores
  static CostModel defaults(int ranks_on_host, int cores);
};

// Estimated time of one call with `algo` (microseconds).
double estimate_us(Algorithm algo, std::size_t bytes, int ranks, const CostModel& model);

// shm_available: the communicator has a shared-memory domain (all ranks on one
// host, shared memory allowed); then "shm" wins unless CHORUS_ALGO says otherwise.
AlgoChoice choose_algorithm(CollectiveKind kind, std::size_t bytes, int ranks,
                            const AlgoOverride& user, const CostModel& model,
                            bool shm_available = false);

// Position of algo in algorithms_for(kind) (the call signature records 1 + it).
int algorithm_index(CollectiveKind kind, Algorithm algo);

// Segment size of the ring pipelines for a call of `bytes` per rank:
// `configured` when the user set one; else about 16 segments per chunk, within
// [256K, 1M], so that transfer and reduction overlap even for a few MiB (while
// segments stay large enough that per-message costs do not dominate). When
// ranks outnumber cores every extra step costs a wake-up: 1M.
std::size_t ring_segment_bytes(std::size_t bytes, int ranks, const CostModel& model,
                               std::size_t configured);

}  // namespace chorus

template <>
struct fmt::formatter<chorus::Algorithm> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(chorus::Algorithm algo, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(chorus::algorithm_name(algo), ctx);
  }
};

template <>
struct fmt::formatter<chorus::AlgoChoice> : fmt::formatter<std::string> {
  template <typename Context>
  auto format(const chorus::AlgoChoice& choice, Context& ctx) const {
    return fmt::formatter<std::string>::format(choice.why(), ctx);
  }
};
