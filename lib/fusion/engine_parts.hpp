// What the fusion engine's source files share (engine.cpp, the cycle and
// the buckets; engine_negotiate.cpp, the negotiation round): internal.
#pragma once

#include <chrono>
#include <cstddef>

#include "base/core/log.hpp"
#include "collectives/call.hpp"
#include "lib/fusion/engine.hpp"
#include "lib/fusion/negotiation.hpp"

namespace chorus::fusion {

inline spdlog::logger& fusion_log() {
  static spdlog::logger& subsystem = logger("fusion");
  return subsystem;
}

constexpr std::size_t kMaxListed = 8;  // tensors named in one message

inline std::chrono::nanoseconds seconds(double s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

// `next` lies right after `prev` in memory, both in place or both with
// their outputs right after each other, of one dtype and op: one allreduce
// over both, where they lie, reduces each.
inline bool lies_after(const FusedTensor& prev, const FusedTensor& next) {
  const std::size_t n = prev.shape.bytes();
  return group_key(prev.shape) == group_key(next.shape) &&
         (prev.send == prev.recv) == (next.send == next.recv) &&
         static_cast<const std::byte*>(prev.send) + n == next.send &&
         static_cast<std::byte*>(prev.recv) + n == next.recv;
}

inline CollectiveCall allreduce_call(const TensorShape& shape, const void* send, void* recv,
                                     std::size_t count) {
  CollectiveCall call;
  call.kind = CollectiveKind::allreduce;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.dtype = shape.dtype;
  call.op = shape.op;
  return call;
}

}  // namespace chorus::fusion
