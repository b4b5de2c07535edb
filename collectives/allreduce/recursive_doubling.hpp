#pragma once

#include <cstddef>

#include "collectives/context.hpp"

namespace chorus {

// Latency-optimal allreduce for small buffers; see the .cpp for the steps.
void recursive_doubling_allreduce(CollectiveContext& ctx, const void* send, void* recv,
                                  std::size_t count, DataType dtype, ReduceOp op);

}  // namespace chorus
