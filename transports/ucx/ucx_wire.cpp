#include "transports/ucx/ucx_wire.hpp"

#include <fmt/format.h>

namespace chorus::ucx {

uint64_t job_hash(std::string_view token) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : token) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

LeadHeader make_lead(uint64_t job, uint64_t length, bool bulk, const CallSignature& sig) {
  LeadHeader h{};
  h.magic = kLeadMagic;
  h.version = kWireVersion;
  h.flags = bulk ? kFlagBulk : 0;
  h.job = job;
  h.length = length;
  h.sig = sig;
  return h;
}

ControlHeader make_control(ControlType type, uint64_t job) {
  ControlHeader h{};
  h.magic = kControlMagic;
  h.version = kWireVersion;
  h.type = static_cast<uint16_t>(type);
  h.job = job;
  return h;
}

std::optional<std::string> validate_lead(const LeadHeader& h, std::size_t received, uint64_t job) {
  if (received < sizeof(LeadHeader))
    return fmt::format("truncated header ({} of {} bytes)", received, sizeof(LeadHeader));
  if (h.magic != kLeadMagic) return fmt::format("bad magic {:#x}", h.magic);
  if (h.version != kWireVersion) return fmt::format("unsupported wire version {}", h.version);
  if (h.job != job) return "it belongs to another job (token mismatch)";
  if ((h.flags & ~kFlagBulk) != 0) return fmt::format("unknown flags {:#x}", h.flags);
  if (h.length > kMaxMessage) return fmt::format("length {} exceeds {}", h.length, kMaxMessage);
  if (h.flags & kFlagBulk) {
    if (received != sizeof(LeadHeader) || h.length == 0)
      return fmt::format("bulk lead of {} bytes announcing {} bytes", received, h.length);
  } else if (received - sizeof(LeadHeader) != h.length) {
    return fmt::format("header says {} bytes but {} arrived", h.length,
                       received - sizeof(LeadHeader));
  }
  return std::nullopt;
}

std::optional<std::string> validate_control(const ControlHeader& h, std::size_t received,
                                            uint64_t job) {
  if (received < sizeof(ControlHeader))
    return fmt::format("truncated control message ({} of {} bytes)", received,
                       sizeof(ControlHeader));
  if (h.magic != kControlMagic) return fmt::format("bad control magic {:#x}", h.magic);
  if (h.version != kWireVersion) return fmt::format("unsupported wire version {}", h.version);
  if (h.job != job) return "it belongs to another job (token mismatch)";
  auto type = static_cast<ControlType>(h.type);
  if (type != ControlType::hello && type != ControlType::goodbye && type != ControlType::abort)
    return fmt::format("unknown control type {}", h.type);
  if (h.length > kMaxReason)
    return fmt::format("reason of {} bytes exceeds {}", h.length, kMaxReason);
  if (received != sizeof(ControlHeader) + h.length)
    return fmt::format("control message of {} bytes announcing {} bytes of reason", received,
                       h.length);
  return std::nullopt;
}

}  // namespace chorus::ucx
