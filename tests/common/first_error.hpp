// For tests that wait on what arrives in the background (a notice, an
// announcement, a peer's death seen by a watch): calls `check` until it
// throws an IoError, for at most 20 s.
#pragma once

#include <chrono>
#include <optional>
#include <thread>

#include "base/core/error.hpp"

namespace chorus::test {

// The first IoError `check` throws, or none within 20 s.
template <typename Check>
std::optional<IoError> first_error(Check&& check) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      check();
    } catch (const IoError& e) {
      return e;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::nullopt;
}

}  // namespace chorus::test
