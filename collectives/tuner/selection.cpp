#include "collectives/tuner/selection.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "collectives/patterns/recursive_doubling.hpp"
#include "base/core/config.hpp"
#include "base/core/error.hpp"

namespace chorus {
namespace {

CollectiveKind parse_kind(std::string_view name) {
  for (auto kind : {CollectiveKind::allreduce, CollectiveKind::broadcast, CollectiveKind::allgather,
                    CollectiveKind::reduce_scatter, CollectiveKind::barrier})
    if (collective_name(kind) == name) return kind;
  throw UsageError(fmt::format("CHORUS_ALGO: unknown collective '{}'", name));
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    auto pos = text.find(sep);
    parts.push_back(text.substr(0, pos));
    if (pos == std::string_view::npos) return parts;
    text.remove_prefix(pos + 1);
  }
}

}  // namespace

std::string_view algorithm_name(Algorithm algo) {
  switch (algo) {
    case Algorithm::ring:
      return "ring";
    case Algorithm::recursive_doubling:
      return "recursive_doubling";
    case Algorithm::dissemination:
      return "dissemination";
    case Algorithm::shm:
      return "shm";
  }
  return "unknown";
}

std::span<const Algorithm> algorithms_for(CollectiveKind kind) {
  using enum Algorithm;
  static constexpr Algorithm allreduce[] = {ring, recursive_doubling, shm};
  static constexpr Algorithm ring_based[] = {ring, shm};
  static constexpr Algorithm barrier[] = {dissemination, shm};
  switch (kind) {
    case CollectiveKind::allreduce:
      return allreduce;
    case CollectiveKind::barrier:
      return barrier;
    default:
      return ring_based;
  }
}

AlgoOverride AlgoOverride::parse(std::string_view text) {
  AlgoOverride result;
  for (auto entry : split(text, ';')) {
    if (entry.empty()) continue;
    auto colon = entry.find(':');
    if (colon == std::string_view::npos)
      throw UsageError(fmt::format("CHORUS_ALGO: '{}' is not collective:rules", entry));
    CollectiveKind kind = parse_kind(entry.substr(0, colon));
    const auto known = algorithms_for(kind);
    auto names = [&] {
      std::vector<std::string_view> out;
      for (Algorithm a : known) out.push_back(algorithm_name(a));
      return fmt::format("{}", fmt::join(out, ", "));
    };
    for (auto rule_text : split(entry.substr(colon + 1), ',')) {
      auto dash = rule_text.find('-');
      auto algo_colon = rule_text.find(':');
      if (dash == std::string_view::npos || algo_colon == std::string_view::npos ||
          dash > algo_colon)
        throw UsageError(fmt::format("CHORUS_ALGO: rule '{}' is not lo-hi:algorithm", rule_text));
      AlgoRule rule;
      rule.lo = parse_bytes(rule_text.substr(0, dash));
      auto hi = rule_text.substr(dash + 1, algo_colon - dash - 1);
      rule.hi = hi == "inf" ? SIZE_MAX : parse_bytes(hi);
      const auto name = rule_text.substr(algo_colon + 1);
      if (rule.lo >= rule.hi)
        throw UsageError(fmt::format("CHORUS_ALGO: empty size range in '{}'", rule_text));
      auto known_algo = std::find_if(known.begin(), known.end(),
                                     [&](Algorithm a) { return algorithm_name(a) == name; });
      if (known_algo == known.end())
        throw UsageError(fmt::format("CHORUS_ALGO: {} has no algorithm '{}' (known: {})",
                                     collective_name(kind), name, names()));
      rule.algo = *known_algo;
      result.rules_[kind].push_back(rule);
    }
  }
  return result;
}

std::optional<Algorithm> AlgoOverride::lookup(CollectiveKind kind, std::size_t bytes) const {
  auto it = rules_.find(kind);
  if (it == rules_.end()) return std::nullopt;
  for (const auto& rule : it->second)
    if (bytes >= rule.lo && bytes < rule.hi) return rule.algo;
  return std::nullopt;
}

CostModel CostModel::defaults(int ranks_on_host, int cores) {
  CostModel m;
  if (cores > 0 && ranks_on_host > cores) {
    m.alpha_us = 20.0 * ranks_on_host / cores;
    m.oversubscribed = true;
  }
  return m;
}

double estimate_us(Algorithm algo, std::size_t bytes, int ranks, const CostModel& m) {
  const double b = static_cast<double>(bytes);
  const double n = ranks;
  double steps = 0, wire = 0, reduced = 0;
  if (algo == Algorithm::ring) {
    // reduce-scatter + allgather: 2(n-1) steps of B/n; (n-1)/n of B reduced.
    steps = 2 * (n - 1);
    wire = 2 * (n - 1) / n * b;
    reduced = (n - 1) / n * b;
  } else {
    // recursive doubling: log2(p) full exchanges, plus fold/unfold of extras.
    const int p = patterns::pow2_floor(ranks);
    const double rounds = patterns::rd_rounds(ranks);
    const double extra = p == ranks ? 0 : 1;
    steps = rounds + 2 * extra;
    wire = (rounds + 2 * extra) * b;
    reduced = (rounds + extra) * b;
  }
  return steps * m.alpha_us + wire * m.us_per_byte + reduced * m.reduce_us_per_byte;
}

std::size_t ring_segment_bytes(std::size_t bytes, int ranks, const CostModel& model,
                               std::size_t configured) {
  constexpr std::size_t kMin = 256 << 10, kMax = 1 << 20;
  if (configured != 0) return configured;
  if (model.oversubscribed) return kMax;
  const std::size_t chunk = bytes / static_cast<std::size_t>(std::max(ranks, 1));
  return std::clamp<std::size_t>(chunk / 16, kMin, kMax);
}

int algorithm_index(CollectiveKind kind, Algorithm algo) {
  const auto known = algorithms_for(kind);
  auto it = std::find(known.begin(), known.end(), algo);
  CHORUS_CHECK(it != known.end(), "{} has no algorithm '{}'", collective_name(kind), algo);
  return static_cast<int>(it - known.begin());
}

std::string AlgoChoice::why() const {
  std::string prefix = shm_refused
                           ? "CHORUS_ALGO asked for shm, which needs every rank on one host and "
                             "CHORUS_TRANSPORT auto or shm; "
                           : "";
  if (forced) return fmt::format("CHORUS_ALGO chose {} for {} bytes", algo, bytes);
  if (algo == Algorithm::shm)
    return fmt::format("all {} ranks share this host: collectives through shared memory", ranks);
  if (ring_us == 0 && recursive_doubling_us == 0)
    return prefix + "the default point-to-point algorithm for this collective";
  return prefix + fmt::format(
                      "cost model for {} bytes, {} ranks (alpha {:.0f} us): ring {:.1f} us, "
                      "recursive doubling {:.1f} us",
                      bytes, ranks, alpha_us, ring_us, recursive_doubling_us);
}

AlgoChoice choose_algorithm(CollectiveKind kind, std::size_t bytes, int ranks,
                            const AlgoOverride& user, const CostModel& model, bool shm_available) {
  AlgoChoice choice;
  choice.bytes = bytes;
  choice.ranks = ranks;
  choice.alpha_us = model.alpha_us;
  std::optional<Algorithm> forced = user.empty() ? std::nullopt : user.lookup(kind, bytes);
  if (forced == Algorithm::shm && !shm_available) {
    choice.shm_refused = true;  // unsupported here: fall through to the others
    forced.reset();
  }
  if (forced) {
    choice.algo = *forced;
    choice.forced = true;
  } else if (shm_available) {
    // Reading peers' data straight from shared memory beats every
    // point-to-point algorithm on one host: no kernel copy, no message steps.
    choice.algo = Algorithm::shm;
  } else if (kind == CollectiveKind::allreduce && ranks > 1) {
    choice.ring_us = estimate_us(Algorithm::ring, bytes, ranks, model);
    choice.recursive_doubling_us = estimate_us(Algorithm::recursive_doubling, bytes, ranks, model);
    choice.algo = choice.recursive_doubling_us < choice.ring_us ? Algorithm::recursive_doubling
                                                                : Algorithm::ring;
  } else {
    choice.algo = algorithms_for(kind).front();
  }
  return choice;
}

}  // namespace chorus
