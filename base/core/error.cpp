#include "base/core/error.hpp"

#include <cstring>

namespace chorus {

std::string errno_message(const std::string& what, int err) {
  return fmt::format("{} (errno {}: {})", what, err, std::strerror(err));
}

void throw_invariant(const char* file, int line, const char* expr, const std::string& detail) {
  throw InvariantError(
      fmt::format("internal error: check '{}' failed at {}:{}: {}", expr, file, line, detail));
}

}  // namespace chorus
