// One named spdlog logger per subsystem ("core", "bootstrap", "tcp", "comm",
// "coll", "launcher", ...), all writing to stderr with the rank in the prefix.
// The level comes from CHORUS_LOG_LEVEL.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace chorus {

spdlog::logger& logger(const std::string& subsystem);

// Put "r<rank>" into every later log line of this process.
void set_log_rank(int rank);

}  // namespace chorus
