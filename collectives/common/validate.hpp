// Argument checks shared by the collective entry points. They throw
// UsageError (CHORUS_ERR_INVALID_ARGUMENT) with a message naming the call.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <limits>

#include "base/core/error.hpp"

namespace chorus {

// count * parts elements of elem_size bytes, refusing sizes that overflow.
inline std::size_t checked_total(std::size_t count, int parts, std::size_t elem_size,
                                 const char* what) {
  const std::size_t p = static_cast<std::size_t>(parts);
  if (count != 0 && (p > std::numeric_limits<std::size_t>::max() / count ||
                     count * p > std::numeric_limits<std::size_t>::max() / elem_size))
    throw UsageError(fmt::format("{}: count {} x {} ranks is too large", what, count, parts));
  return count * p;
}

inline void require_buffer(const void* p, const char* what) {
  if (p == nullptr) throw UsageError(fmt::format("{} buffer is null with a non-zero count", what));
}

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
inline bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

}  // namespace chorus
