// The messages between a parameter server and its workers (the chief is a
// worker too). Every request is a Header on kRequestTag, then, when
// Header::bytes > 0, its payload on kPayloadTag; every request gets a reply
// Header on kReplyTag, then a payload on kReplyPayloadTag for kPull and
// kRead. Messages of one (sender, receiver, tag) keep their order, so a
// header and its payload pair up without sequence numbers.
//
//   request   payload               server does                     reply payload
//   kSet      the shard's values    sets them (init, restore)       -
//   kRead     -                     -                               the shard's values
//   kPull     -                     waits until step may start      the shard's values
//   kPush     the shard's gradients applies them (sync: the mean)   -
//   kDone     -                     counts the worker out           -
//
// A shard's values and gradients travel as one buffer: the server's
// variables in registration order, each in its own dtype, back to back.
// Every reply carries the server's update count and the workers it has seen
// fail, so every worker, and the chief in particular, learns of a failure
// with its next reply.
#pragma once

#include <cstdint>

#include "base/core/contract.hpp"

namespace chorus::strategy::ps {

enum class Kind : uint32_t { set = 1, read = 2, pull = 3, push = 4, done = 5, reply = 6 };

struct Header {
  uint32_t kind = 0;  // Kind
  uint32_t unused = 0;
  int64_t step = 0;     // pull: the step the worker starts; push: the step its gradient is of
  uint64_t bytes = 0;   // the payload that follows (0: none)
  uint64_t failed = 0;  // reply: bit r set when the server saw rank r fail (ranks < 64)
  int64_t version = 0;  // reply: updates the server has applied
};
static_assert(sizeof(Header) == 40);

inline constexpr uint32_t kRequestTag = 1;
inline constexpr uint32_t kPayloadTag = 2;
inline constexpr uint32_t kReplyTag = 3;
inline constexpr uint32_t kReplyPayloadTag = 4;

// What the transport compares between a send and its receive: a point-to-point
// message of `bytes` bytes.
inline CallSignature message_signature(uint64_t bytes) {
  CallSignature sig;
  sig.kind = static_cast<uint8_t>(CollectiveKind::send);
  sig.count = bytes;
  return sig;
}

}  // namespace chorus::strategy::ps
