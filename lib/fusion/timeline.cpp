#include "lib/fusion/timeline.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <system_error>

#include "base/core/error.hpp"
#include "base/core/log.hpp"

namespace chorus::fusion {

std::string Timeline::file_for(const std::string& path, int rank) {
  std::string stem = path;
  const std::string json = ".json";
  if (stem.size() > json.size() && stem.compare(stem.size() - json.size(), json.size(), json) == 0)
    stem.resize(stem.size() - json.size());
  return fmt::format("{}.rank{}.json", stem, rank);
}

Timeline::Timeline(const std::string& path, int rank) : rank_(rank), origin_(Clock::now()) {
  if (path.empty()) return;
  file_name_ = file_for(path, rank);
  file_ = std::fopen(file_name_.c_str(), "w");
  if (!file_)
    throw UsageError(
        errno_message(fmt::format("CHORUS_TIMELINE: cannot write {}", file_name_), errno));
  std::fputs("[\n", file_);
  write({{"name", "process_name"},
         {"ph", "M"},
         {"pid", rank_},
         {"args", {{"name", fmt::format("rank {}", rank_)}}}});
  write({{"name", "thread_name"},
         {"ph", "M"},
         {"pid", rank_},
         {"tid", 0},
         {"args", {{"name", "engine"}}}});
}

Timeline::~Timeline() {
  close();
}

void Timeline::close() {
  if (!file_) return;
  std::fputs("\n]\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

double Timeline::us(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

void Timeline::write(const nlohmann::json& event) {
  if (!first_) std::fputs(",\n", file_);
  first_ = false;
  const std::string text = event.dump();
  std::fwrite(text.data(), 1, text.size(), file_);
}

int Timeline::track(const std::string& tensor) {
  if (!file_) return 0;
  auto [it, fresh] = tracks_.emplace(tensor, static_cast<int>(tracks_.size()) + 1);
  if (fresh)
    write({{"name", "thread_name"},
           {"ph", "M"},
           {"pid", rank_},
           {"tid", it->second},
           {"args", {{"name", tensor}}}});
  return it->second;
}

void Timeline::span(int track, const char* name, Clock::time_point start, Clock::time_point end,
                    nlohmann::json args) {
  if (!file_) return;
  nlohmann::json event = {{"name", name}, {"ph", "X"},       {"pid", rank_},
                          {"tid", track}, {"ts", us(start)}, {"dur", us(end) - us(start)}};
  if (!args.is_null()) event["args"] = std::move(args);
  write(event);
}

void Timeline::instant(int track, const char* name, Clock::time_point at, nlohmann::json args) {
  if (!file_) return;
  nlohmann::json event = {{"name", name}, {"ph", "i"},    {"s", "t"},
                          {"pid", rank_}, {"tid", track}, {"ts", us(at)}};
  if (!args.is_null()) event["args"] = std::move(args);
  write(event);
}

}  // namespace chorus::fusion
