// What the C entry points share: arguments checked and converted at the C
// boundary (deadlines, out-pointers, the C enums), before the C++ core.
#pragma once

#include <fmt/format.h>

#include <string>

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

// Runs a call on a live communicator. A call refused for its arguments
// (CHORUS_ERR_INVALID_ARGUMENT) fails the communicator here and at every
// peer with that code and message: the peers may already wait in the call
// this rank will never make, and every rank must reach the same verdict.
template <typename Body>
void on_comm(chorus_comm_t handle, Body&& body) {
  auto& comm = lookup(handle);
  try {
    body(comm);
  } catch (const UsageError& e) {
    if (e.code() != CHORUS_ERR_INVALID_ARGUMENT) throw;
    const std::string message = fmt::format("rank {}: {}", comm.rank(), e.what());
    comm.fail(CHORUS_ERR_INVALID_ARGUMENT, message);
    throw UsageError(CHORUS_ERR_INVALID_ARGUMENT, message);
  }
}

}  // namespace chorus::api
