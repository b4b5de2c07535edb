#include "collectives/tuner/selection.hpp"

#include <fmt/format.h>

#include "base/core/config.hpp"
#include "base/core/error.hpp"
#include "collectives/call.hpp"
#include "collectives/common/subcall.hpp"
#include "collectives/team.hpp"
#include "collectives/tuner/tuning_file.hpp"

namespace chorus {
namespace {

// Splits at `sep` outside parentheses: the commas of
// "hierarchical(within=shm,across=ring)" belong to the choice, not the rules.
std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '(') ++depth;
    if (text[i] == ')') --depth;
    if (text[i] == sep && depth == 0) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(text.substr(start));
  return parts;
}

std::string known_names(CollectiveKind kind) {
  std::vector<std::string_view> out;
  for (const AlgorithmSpec* a : algorithms_for(kind)) out.push_back(a->name);
  return fmt::format("{}", fmt::join(out, ", "));
}

// The registry's copy of `name` among the stage collectives of `role`
// (it outlives the text parsed), or empty.
std::string_view stage_name(CollectiveKind outer, StageRole role, std::string_view name) {
  for (CollectiveKind k : stage_kinds(outer, role))
    if (const AlgorithmSpec* a = find_algorithm(k, name)) return a->name;
  return {};
}

std::string stage_names(CollectiveKind outer, StageRole role) {
  std::vector<std::string> out;
  for (CollectiveKind k : stage_kinds(outer, role))
    out.push_back(fmt::format("{}: {}", collective_name(k), known_names(k)));
  return fmt::format("{}", fmt::join(out, "; "));
}

}  // namespace

CollectiveKind parse_collective(std::string_view name, std::string_view what) {
  for (int k = 1; k < kCollectiveKinds; ++k) {
    auto kind = static_cast<CollectiveKind>(k);
    if (kind != CollectiveKind::send && collective_name(kind) == name) return kind;
  }
  throw UsageError(fmt::format("{}: unknown collective '{}'", what, name));
}

AlgoChoice AlgoChoice::parse(CollectiveKind kind, std::string_view text, std::string_view what) {
  AlgoChoice c;
  const auto open = text.find('(');
  const auto name = text.substr(0, open);
  c.algo = find_algorithm(kind, name);
  if (!c.algo)
    throw UsageError(fmt::format("{}: {} has no algorithm '{}' (known: {})", what,
                                 collective_name(kind), name, known_names(kind)));
  if (open == std::string_view::npos) return c;
  if (text.back() != ')' || open + 2 > text.size())
    throw UsageError(fmt::format("{}: '{}' is not name(key=algorithm,...)", what, text));
  if (name != "hierarchical" || stage_kinds(kind, StageRole::within).empty())
    throw UsageError(fmt::format("{}: {} {} has no stages to name algorithms for ('{}')", what,
                                 collective_name(kind), name, text));
  for (auto inner : split(text.substr(open + 1, text.size() - open - 2), ',')) {
    const auto eq = inner.find('=');
    const auto key = inner.substr(0, eq);
    if (eq == std::string_view::npos || (key != "within" && key != "across"))
      throw UsageError(fmt::format("{}: '{}' in '{}' is not within=algorithm or across=algorithm",
                                   what, inner, text));
    const StageRole role = key == "within" ? StageRole::within : StageRole::across;
    const auto inner_name = inner.substr(eq + 1);
    const std::string_view known = stage_name(kind, role, inner_name);
    if (known.empty())
      throw UsageError(fmt::format("{}: no stage {} hosts of {} {} has an algorithm '{}' ({})",
                                   what, key, collective_name(kind), name, inner_name,
                                   stage_names(kind, role)));
    (role == StageRole::within ? c.within : c.across) = known;
  }
  return c;
}

std::string AlgoChoice::name() const {
  std::string out(algo ? algo->name : "?");
  if (within.empty() && across.empty()) return out;
  std::vector<std::string> inner;
  if (!within.empty()) inner.push_back(fmt::format("within={}", within));
  if (!across.empty()) inner.push_back(fmt::format("across={}", across));
  return fmt::format("{}({})", out, fmt::join(inner, ","));
}

AlgoOverride AlgoOverride::parse(std::string_view text) {
  AlgoOverride result;
  for (auto entry : split(text, ';')) {
    if (entry.empty()) continue;
    auto colon = entry.find(':');
    if (colon == std::string_view::npos)
      throw UsageError(fmt::format("CHORUS_ALGO: '{}' is not collective:rules", entry));
    CollectiveKind kind = parse_collective(entry.substr(0, colon), "CHORUS_ALGO");
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
      if (rule.lo >= rule.hi)
        throw UsageError(fmt::format("CHORUS_ALGO: empty size range in '{}'", rule_text));
      rule.choice = AlgoChoice::parse(kind, rule_text.substr(algo_colon + 1), "CHORUS_ALGO");
      result.rules_[kind].push_back(rule);
    }
  }
  return result;
}

const AlgoChoice* AlgoOverride::lookup_choice(CollectiveKind kind, std::size_t bytes) const {
  auto it = rules_.find(kind);
  if (it == rules_.end()) return nullptr;
  for (const auto& rule : it->second)
    if (bytes >= rule.lo && bytes < rule.hi) return &rule.choice;
  return nullptr;
}

const AlgorithmSpec* AlgoOverride::lookup(CollectiveKind kind, std::size_t bytes) const {
  const AlgoChoice* c = lookup_choice(kind, bytes);
  return c ? c->algo : nullptr;
}

const AlgoChoice* AlgoOverride::choice_of(const AlgorithmSpec& running, std::size_t bytes,
                                          const Team& team) const {
  if (const AlgoChoice* c = lookup_choice(running.kind, bytes); c && c->algo == &running) return c;
  if (!tuning_) return nullptr;
  const TuningEntry* e = tuning_->find(running.kind, team.size(), hosts_of(team), bytes);
  return e && e->choice.algo == &running ? &e->choice : nullptr;
}

int hosts_of(const Team& team) {
  if (team.hierarchy) return team.hierarchy->hosts;
  return team.placement.spans_hosts() ? 0 : 1;
}

Selection select_algorithm(const CollectiveCall& call, std::size_t bytes, const Team& team,
                           const AlgoOverride& user, const CostModel& model, bool explain) {
  Selection s;
  s.bytes = bytes;
  const AlgoChoice* rule = user.empty() ? nullptr : user.lookup_choice(call.kind, bytes);
  const AlgorithmSpec* forced = rule ? rule->algo : nullptr;
  const TuningEntry* entry =
      user.tuning() ? user.tuning()->find(call.kind, team.size(), hosts_of(team), bytes) : nullptr;
  const AlgorithmSpec* tuned = nullptr;
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
        s.choice = rule;
      }
    }
    if (entry && spec == entry->choice.algo && !c.refusal) tuned = spec;
    if (!c.refusal && (!best || c.estimate_us < best_us)) {
      best = spec;
      best_us = c.estimate_us;
    }
  }
  if (!s.spec && tuned) {
    s.spec = tuned;
    s.tuned = entry;
    s.choice = &entry->choice;
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

// "tuning file chose X (measured Y us; next best Z W us)".
static std::string tuned_why(const TuningEntry& e, std::size_t bytes) {
  const std::string name = e.choice.name();
  std::string out = fmt::format("tuning file chose {} for {} bytes", name, bytes);
  auto mine = e.times_us.find(name);
  const std::pair<const std::string, double>* next = nullptr;
  for (const auto& t : e.times_us)
    if (t.first != name && (!next || t.second < next->second)) next = &t;
  std::vector<std::string> measured;
  if (mine != e.times_us.end()) measured.push_back(fmt::format("measured {:.1f} us", mine->second));
  if (next) measured.push_back(fmt::format("next best {} {:.1f} us", next->first, next->second));
  if (!measured.empty()) out += fmt::format(" ({})", fmt::join(measured, "; "));
  return out;
}

std::string Selection::why() const {
  std::string out;
  if (forced) {
    out = fmt::format("CHORUS_ALGO chose {} for {} bytes", choice ? choice->name() : spec->name,
                      bytes);
  } else {
    if (refused_override)
      out = fmt::format("CHORUS_ALGO chose {}, which refused: {}; ", refused_override->name,
                        override_refusal);
    out += tuned ? tuned_why(*tuned, bytes) : fmt::format("cheapest estimate for {} bytes", bytes);
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
