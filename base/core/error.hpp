// Error kinds inside Chorus. Exceptions carry a chorus_result_t so that the C
// boundary can map them without guessing:
//  - IoError: recoverable communication failures (timeout, peer failure,
//    mismatch, network/system errors). The communicator may be unusable
//    afterwards, but the process is fine.
//  - UsageError: the caller passed something invalid.
//  - InvariantError: Chorus itself is wrong; the message prints the values.
#pragma once

#include <fmt/format.h>

#include <exception>
#include <stdexcept>
#include <string>

#include "include/chorus.h"
#include "include/chorus/error.hpp"  // chorus::Error, shared with the C++ API

namespace chorus {

class IoError : public Error {
 public:
  using Error::Error;
};

// An IoError as a request's failure (Completion::fail takes an exception_ptr).
inline std::exception_ptr io_error(chorus_result_t code, const std::string& message) {
  return std::make_exception_ptr(IoError(code, message));
}

class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(CHORUS_ERR_INVALID_ARGUMENT, message) {}
  UsageError(chorus_result_t code, const std::string& message) : Error(code, message) {}
};

class InvariantError : public Error {
 public:
  explicit InvariantError(const std::string& message) : Error(CHORUS_ERR_INTERNAL, message) {}
};

// Builds "<message> (errno N: text)" for system call failures.
std::string errno_message(const std::string& what, int err);

[[noreturn]] void throw_invariant(const char* file, int line, const char* expr,
                                  const std::string& detail);

}  // namespace chorus

// CHORUS_CHECK(cond, "fmt {}", values...) throws InvariantError naming the
// condition, the location and the values involved.
#define CHORUS_CHECK(cond, ...)                                                         \
  do {                                                                                  \
    if (!(cond)) [[unlikely]]                                                           \
      ::chorus::throw_invariant(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__)); \
  } while (0)
