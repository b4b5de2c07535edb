#include "collectives/verdict/recover.hpp"

namespace chorus {

std::optional<std::span<std::byte>> replicated_result(const CollectiveCall& call,
                                                      const CallShape& shape,
                                                      std::size_t max_bytes) {
  if (max_bytes == 0) return std::nullopt;
  switch (call.kind) {
    case CollectiveKind::barrier:
      return std::span<std::byte>();
    case CollectiveKind::allreduce:
    case CollectiveKind::broadcast:
    case CollectiveKind::allgather:
    case CollectiveKind::allgatherv:
      break;
    default:
      return std::nullopt;
  }
  if (call.memory != MemoryKind::host || shape.bytes > max_bytes) return std::nullopt;
  return std::span<std::byte>(static_cast<std::byte*>(call.recv), shape.bytes);
}

}  // namespace chorus
