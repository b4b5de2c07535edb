// Captures what one subsystem's logger writes (at debug and above) while in
// scope, for tests that must see which path the library took: the algorithm
// it chose and why, how many attempts a connection needed. Attach it before
// the code under test runs on other threads (spdlog's sink list is not
// synchronised); the sink itself is.
#pragma once

#include <spdlog/sinks/ringbuffer_sink.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "base/core/log.hpp"

namespace chorus::test {

class LogCapture {
 public:
  explicit LogCapture(const std::string& subsystem, std::size_t lines = 4096)
      : logger_(logger(subsystem)),
        sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(lines)),
        level_(logger_.level()) {
    sink_->set_pattern("%v");
    logger_.sinks().push_back(sink_);
    logger_.set_level(spdlog::level::debug);
  }
  ~LogCapture() {
    logger_.set_level(level_);
    auto& sinks = logger_.sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::vector<std::string> lines() const { return sink_->last_formatted(); }
  // The captured lines that contain `text`.
  std::vector<std::string> matching(const std::string& text) const {
    std::vector<std::string> out;
    for (auto& l : lines())
      if (l.find(text) != std::string::npos) out.push_back(l);
    return out;
  }

 private:
  spdlog::logger& logger_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  spdlog::level::level_enum level_;
};

}  // namespace chorus::test
