// The tuning file: algorithm choices measured on the real job by chorus-tune
// (tools/chorus_tune.cpp), loaded from CHORUS_TUNING_FILE at init, so a
// cluster is tuned once from measurement instead of from the cost model.
//
//   {"version": 1,
//    "links": {"other_host": {"alpha_us": 35.0, "gbps": 0.95}},        (optional)
//    "entries": [{"collective": "allreduce", "ranks": 4, "hosts": 2,
//                 "lo": 0, "hi": 65536,                                 (hi null: inf)
//                 "algorithm": "hierarchical(across=ring)",
//                 "times_us": {"ring": 120.5, "hierarchical(across=ring)": 80.1}}]}
//
// An entry covers calls of its collective on a team of `ranks` ranks over
// `hosts` hosts (hosts_of in selection.hpp) with lo <= bytes < hi. Selection
// takes it after a CHORUS_ALGO rule and before the cost model, unless its
// algorithm refuses the call. times_us is what chorus-tune measured at the
// sizes of the range (the median of the slowest rank's time, per algorithm,
// at the range's middle size): the explanation quotes it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/core/config.hpp"
#include "collectives/tuner/selection.hpp"

namespace chorus {

struct TuningEntry {
  CollectiveKind kind = CollectiveKind::allreduce;
  int ranks = 0;
  int hosts = 0;
  std::size_t lo = 0;
  std::size_t hi = SIZE_MAX;  // exclusive; SIZE_MAX is written as null ("inf")
  AlgoChoice choice;
  std::map<std::string, double> times_us;  // by AlgoChoice::name()
};

// A link measured between hosts (for the cost model; the link probe fills it).
struct TunedLink {
  double alpha_us = 0;
  double gbps = 0;
};

struct TuningTable {
  std::string path;  // where it was read from, for messages
  std::vector<TuningEntry> entries;
  std::map<std::string, TunedLink> links;

  // The first entry for `kind` on `team` covering `bytes`, or null.
  const TuningEntry* find(CollectiveKind kind, int ranks, int hosts, std::size_t bytes) const;

  // Throws UsageError naming `path` and the problem (bad JSON, a missing or
  // mistyped field, an unknown collective or algorithm, an empty range).
  static TuningTable parse(std::string_view json_text, const std::string& path);
  static TuningTable load(const std::string& path);
  std::string to_json() const;
};

// The user's choices of `config`: CHORUS_ALGO, and CHORUS_TUNING_FILE when set.
AlgoOverride user_choices(const Config& config);

}  // namespace chorus
