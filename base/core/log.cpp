#include "base/core/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>

#include <map>
#include <mutex>

#include "base/core/config.hpp"

namespace chorus {
namespace {

// Never destroyed: objects torn down during static destruction (a
// communicator a program never destroyed) may still log on their way out.
std::mutex& registry_mutex() {  // guards loggers and current_rank
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::map<std::string, std::shared_ptr<spdlog::logger>>& loggers() {
  static auto* map = new std::map<std::string, std::shared_ptr<spdlog::logger>>;
  return *map;
}
int current_rank = -1;

std::string pattern_for(int rank) {
  std::string who = rank >= 0 ? fmt::format("r{}", rank) : std::string("pid %P");
  return "[chorus " + who + " %n %l] %v";
}

}  // namespace

spdlog::logger& logger(const std::string& subsystem) {
  std::lock_guard lock(registry_mutex());
  auto& map = loggers();
  auto it = map.find(subsystem);
  if (it != map.end()) return *it->second;
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto log = std::make_shared<spdlog::logger>(subsystem, sink);
  log->set_pattern(pattern_for(current_rank));
  log->set_level(spdlog::level::from_str(global_config().log_level));
  log->flush_on(spdlog::level::warn);
  map.emplace(subsystem, log);
  return *log;
}

void set_log_rank(int rank) {
  std::lock_guard lock(registry_mutex());
  current_rank = rank;
  for (auto& [name, log] : loggers()) log->set_pattern(pattern_for(rank));
}

}  // namespace chorus
