#pragma once

#include <cstddef>
#include <span>

#include "collectives/context.hpp"

namespace chorus {

// Latency-optimal allreduce for small buffers; see the .cpp for the steps.
void recursive_doubling_allreduce(CollectiveContext& ctx, const void* send, void* recv,
                                  std::size_t count, DataType dtype, ReduceOp op);

// The pre and post steps of recursive doubling and halving when n is not a
// power of two (patterns/recursive_doubling.hpp: p, extra ranks).
//
// fold_extra_in, first: an extra rank sends `buf` (its input) to its partner,
// then receives the result into `buf` once the core ranks are done, and
// returns true (its part of the call is over). A core rank with an extra
// partner receives the partner's input into `staging` (at least buf's size)
// and reduces it into buf, lower rank first (buf op theirs); it returns
// false, as does a core rank without one.
bool fold_extra_in(CollectiveContext& ctx, std::span<std::byte> buf, std::span<std::byte> staging,
                   std::size_t count, ReduceFn reduce);
// fold_extra_out, last, on core ranks: sends the result to the extra partner, if any.
void fold_extra_out(CollectiveContext& ctx, std::span<const std::byte> buf);

}  // namespace chorus
