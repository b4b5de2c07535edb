// epoll_event.data.u64 of the TCP transport: a peer's rank, or a tagged id.
#pragma once

#include <cstdint>

namespace chorus::tcp {

inline constexpr uint64_t kListenId = uint64_t(1) << 40;
inline constexpr uint64_t kWakeId = uint64_t(2) << 40;
inline constexpr uint64_t kStrangerBase = uint64_t(3) << 40;

inline constexpr uint64_t kProbeBase = uint64_t(4) << 40;

inline uint64_t probe_id(int peer) {
  return kProbeBase | static_cast<uint32_t>(peer);
}
inline bool is_probe_id(uint64_t id) {
  return (id & ~uint64_t(0xffffffff)) == kProbeBase;
}

inline uint64_t stranger_id(int fd) {
  return kStrangerBase | static_cast<uint32_t>(fd);
}
inline bool is_stranger_id(uint64_t id) {
  return (id & ~uint64_t(0xffffffff)) == kStrangerBase;
}
inline int stranger_fd(uint64_t id) {
  return static_cast<int>(id & 0xffffffff);
}

}  // namespace chorus::tcp
