// A Chrome trace (the JSON array format that Perfetto and chrome://tracing
// open) of one rank's fusion engine: a track per tensor with its phases
// (submitted, negotiate, copy_in, allreduce, copy_out) and a track of the
// engine's own cycles and collective calls (with the algorithm chosen).
// Written by whoever runs the engine's cycle (one thread at a time), as
// events happen; closed with "]" when the engine stops (a trace cut short
// by a crash still opens in Perfetto).
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace chorus::fusion {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  // path "" : disabled (every call returns at once). The file is
  // PATH.rank<rank>.json (a trailing ".json" of PATH is dropped first).
  Timeline(const std::string& path, int rank);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  bool enabled() const { return file_ != nullptr; }
  const std::string& file_name() const { return file_name_; }
  static std::string file_for(const std::string& path, int rank);

  // The track of a tensor (named after it on first use); 0 is the engine's.
  int track(const std::string& tensor);
  void span(int track, const char* name, Clock::time_point start, Clock::time_point end,
            nlohmann::json args = nullptr);
  void instant(int track, const char* name, Clock::time_point at, nlohmann::json args = nullptr);
  void close();

 private:
  void write(const nlohmann::json& event);
  double us(Clock::time_point t) const;

  std::FILE* file_ = nullptr;
  std::string file_name_;
  int rank_;
  Clock::time_point origin_;
  bool first_ = true;
  std::unordered_map<std::string, int> tracks_;
};

}  // namespace chorus::fusion
