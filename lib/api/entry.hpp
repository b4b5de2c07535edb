// What the C entry points share: arguments checked and converted at the C
// boundary (deadlines, out-pointers, the C enums), before the C++ core.
#pragma once

#include <fmt/format.h>

#include "base/core/error.hpp"
#include "lib/api/handles.hpp"

namespace chorus::api {

inline Deadline deadline_from(Communicator& comm, int64_t timeout_ms) {
  if (timeout_ms < 0)
    throw UsageError(fmt::format("timeout_ms {} is negative (0 means CHORUS_TIMEOUT)", timeout_ms));
  return timeout_ms == 0 ? comm.default_deadline() : Deadline::after_ms(timeout_ms);
}

inline DataType to_dtype(chorus_dtype_t d, const char* what) {
  if (!valid_dtype(d))
    throw UsageError(fmt::format("{}: unknown dtype {}", what, static_cast<int>(d)));
  return static_cast<DataType>(d);
}

inline ReduceOp to_op(chorus_op_t o, const char* what) {
  if (!valid_op(o))
    throw UsageError(fmt::format("{}: unknown reduction op {}", what, static_cast<int>(o)));
  return static_cast<ReduceOp>(o);
}

inline void check_out(const void* p, const char* name) {
  if (!p) throw UsageError(fmt::format("{} is NULL", name));
}

}  // namespace chorus::api
