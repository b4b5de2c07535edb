#include "collectives/tuner/selection.hpp"

#include <fmt/format.h>

#include "base/core/config.hpp"
#include "base/core/error.hpp"
#include "collectives/call.hpp"
#include "collectives/team.hpp"

namespace chorus {
namespace {

CollectiveKind parse_kind(std::string_view name) {
  for (int k = 1; k < kCollectiveKinds; ++k) {
    auto kind = static_cast<CollectiveKind>(k);
    if (kind != CollectiveKind::send && collective_name(kind) == name) return kind;
  }
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

std::string known_names(CollectiveKind kind) {
  std::vector<std::string_view> out;
  for (const AlgorithmSpec* a : algorithms_for(kind)) out.push_back(a->name);
  return fmt::format("{}", fmt::join(out, ", "));
}

}  // namespace

AlgoOverride AlgoOverride::parse(std::string_view text) {
  AlgoOverride result;
  for (auto entry : split(text, ';')) {
    if (entry.empty()) continue;
    auto colon = entry.find(':');
    if (colon == std::string_view::npos)
      throw UsageError(fmt::format("CHORUS_ALGO: '{}' is not collective:rules", entry));
    CollectiveKind kind = parse_kind(entry.substr(0, colon));
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
      rule.algo = find_algorithm(kind, name);
      if (!rule.algo)
        throw UsageError(fmt::format("CHORUS_ALGO: {} has no algorithm '{}' (known: {})",
                                     collective_name(kind), name, known_names(kind)));
      result.rules_[kind].push_back(rule);
    }
  }
  return result;
}

const AlgorithmSpec* AlgoOverride::lookup(CollectiveKind kind, std::size_t bytes) const {
  auto it = rules_.find(kind);
  if (it == rules_.end()) return nullptr;
  for (const auto& rule : it->second)
    if (bytes >= rule.lo && bytes < rule.hi) return rule.algo;
  return nullptr;
}

Selection select_algorithm(const CollectiveCall& call, std::size_t bytes, const Team& team,
                           const AlgoOverride& user, const CostModel& model, bool explain) {
  Selection s;
  s.bytes = bytes;
  const AlgorithmSpec* forced = user.empty() ? nullptr : user.lookup(call.kind, bytes);
  const AlgorithmSpec* best = nullptr;
  double best_us = 0;
  for (const AlgorithmSpec* spec : algorithms_for(call.kind)) {
    Candidate c;
    c.spec = spec;
    c.refusal = spec->refusal(team, call);
    if (!c.refusal) c.estimate_us = spec->estimate_us(model, team, bytes);
    if (explain) s.candidates.push_back(c);
    if (spec == forced) {
      if (c.refusal) {
        s.refused_override = spec;
        s.override_refusal = c.refusal;
      } else {
        s.spec = spec;
        s.forced = true;
      }
    }
    if (!c.refusal && (!best || c.estimate_us < best_us)) {
      best = spec;
      best_us = c.estimate_us;
    }
  }
  if (!s.spec) s.spec = best;
  if (!s.spec) {
    std::string reasons;
    for (const AlgorithmSpec* spec : algorithms_for(call.kind))
      reasons += fmt::format("; {}: {}", spec->name, spec->refusal(team, call));
    throw UsageError(CHORUS_ERR_UNSUPPORTED,
                     fmt::format("{} of {} bytes on {} ranks: no algorithm can run it{}",
                                 collective_name(call.kind), bytes, team.size(), reasons));
  }
  s.id = algorithm_id(*s.spec);
  return s;
}

std::string Selection::why() const {
  std::string out;
  if (forced) {
    out = fmt::format("CHORUS_ALGO chose {} for {} bytes", spec->name, bytes);
  } else {
    if (refused_override)
      out = fmt::format("CHORUS_ALGO chose {}, which refused: {}; ", refused_override->name,
                        override_refusal);
    out += fmt::format("cheapest estimate for {} bytes", bytes);
  }
  for (const auto& c : candidates) {
    if (c.refusal)
      out += fmt::format("; {} refused ({})", c.spec->name, c.refusal);
    else
      out += fmt::format("; {} {:.1f} us", c.spec->name, c.estimate_us);
  }
  return out;
}

}  // namespace chorus
