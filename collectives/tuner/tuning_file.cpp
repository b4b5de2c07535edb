#include "collectives/tuner/tuning_file.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/core/error.hpp"

namespace chorus {
namespace {

using nlohmann::json;

// The field `key` of `j`, of the type `T`; a missing or mistyped one names itself.
template <typename T>
T field(const json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end()) throw UsageError(fmt::format("{}: no '{}'", what, key));
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw UsageError(fmt::format("{}: '{}' is {}, not the type expected", what, key, it->dump()));
  }
}

TuningEntry parse_entry(const json& j, const std::string& what) {
  if (!j.is_object()) throw UsageError(fmt::format("{}: not an object", what));
  TuningEntry e;
  e.kind = parse_collective(field<std::string>(j, "collective", what), what);
  e.ranks = field<int>(j, "ranks", what);
  e.hosts = field<int>(j, "hosts", what);
  if (e.ranks < 1 || e.hosts < 1)
    throw UsageError(fmt::format("{}: ranks and hosts must be positive", what));
  e.lo = field<std::size_t>(j, "lo", what);
  auto hi = j.find("hi");
  if (hi == j.end()) throw UsageError(fmt::format("{}: no 'hi'", what));
  e.hi = hi->is_null() ? SIZE_MAX : field<std::size_t>(j, "hi", what);
  if (e.lo >= e.hi) throw UsageError(fmt::format("{}: empty size range", what));
  e.choice = AlgoChoice::parse(e.kind, field<std::string>(j, "algorithm", what), what);
  if (auto t = j.find("times_us"); t != j.end()) {
    if (!t->is_object()) throw UsageError(fmt::format("{}: 'times_us' is not an object", what));
    for (const auto& [name, us] : t->items()) {
      if (!us.is_number())
        throw UsageError(fmt::format("{}: times_us '{}' is not a number", what, name));
      e.times_us[name] = us.get<double>();
    }
  }
  return e;
}

}  // namespace

const TuningEntry* TuningTable::find(CollectiveKind kind, int ranks, int hosts,
                                     std::size_t bytes) const {
  for (const auto& e : entries)
    if (e.kind == kind && e.ranks == ranks && e.hosts == hosts && bytes >= e.lo && bytes < e.hi)
      return &e;
  return nullptr;
}

TuningTable TuningTable::parse(std::string_view text, const std::string& path) {
  const std::string what = fmt::format("tuning file {}", path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("{}: not JSON: {}", what, e.what()));
  }
  if (!j.is_object()) throw UsageError(fmt::format("{}: not a JSON object", what));
  if (field<int>(j, "version", what) != 1)
    throw UsageError(fmt::format("{}: version {} (this build reads 1)", what, j["version"].dump()));
  TuningTable t;
  t.path = path;
  auto entries = j.find("entries");
  if (entries == j.end() || !entries->is_array())
    throw UsageError(fmt::format("{}: no 'entries' array", what));
  for (std::size_t i = 0; i < entries->size(); ++i)
    t.entries.push_back(parse_entry((*entries)[i], fmt::format("{}: entry {}", what, i)));
  if (auto links = j.find("links"); links != j.end()) {
    if (!links->is_object()) throw UsageError(fmt::format("{}: 'links' is not an object", what));
    for (const auto& [name, l] : links->items()) {
      const std::string at = fmt::format("{}: link '{}'", what, name);
      t.links[name] = TunedLink{field<double>(l, "alpha_us", at), field<double>(l, "gbps", at)};
    }
  }
  return t;
}

TuningTable TuningTable::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("tuning file {}: cannot be read", path));
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

std::string TuningTable::to_json() const {
  json entries_out = json::array();
  for (const auto& e : entries) {
    json times = json::object();
    for (const auto& [name, us] : e.times_us) times[name] = us;
    entries_out.push_back({{"collective", std::string(collective_name(e.kind))},
                           {"ranks", e.ranks},
                           {"hosts", e.hosts},
                           {"lo", e.lo},
                           {"hi", e.hi == SIZE_MAX ? json(nullptr) : json(e.hi)},
                           {"algorithm", e.choice.name()},
                           {"times_us", times}});
  }
  json out = {{"version", 1}, {"entries", entries_out}};
  if (!links.empty()) {
    json l = json::object();
    for (const auto& [name, link] : links)
      l[name] = {{"alpha_us", link.alpha_us}, {"gbps", link.gbps}};
    out["links"] = l;
  }
  return out.dump(1) + "\n";
}

AlgoOverride user_choices(const Config& config) {
  AlgoOverride user = AlgoOverride::parse(config.algo);
  if (!config.tuning_file.empty())
    user.set_tuning(std::make_shared<const TuningTable>(TuningTable::load(config.tuning_file)));
  return user;
}

}  // namespace chorus
