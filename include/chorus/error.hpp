// chorus::Error: what the C++ API throws, carrying the C API's result code.
// The library's own error kinds (IoError, UsageError, InvariantError, in
// base/core/error.hpp) derive from this one class.
#pragma once

#include <chorus.h>

#include <stdexcept>
#include <string>

namespace chorus {

class Error : public std::runtime_error {
 public:
  Error(chorus_result_t code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  chorus_result_t code() const noexcept { return code_; }

 private:
  chorus_result_t code_;
};

}  // namespace chorus
