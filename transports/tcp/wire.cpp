#include "transports/tcp/wire.hpp"

#include <fmt/format.h>

#include <cstring>

namespace chorus::tcp {

FrameHeader make_frame(FrameType type, uint32_t tag, uint64_t length, const CallSignature& sig) {
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.version = kWireVersion;
  h.type = static_cast<uint8_t>(type);
  h.tag = tag;
  h.length = length;
  h.sig = sig;
  return h;
}

Hello make_hello(std::string_view token, int from, int to, int world_size, HelloPurpose purpose) {
  Hello h{};
  h.magic = kHelloMagic;
  h.version = kWireVersion;
  h.purpose = static_cast<uint16_t>(purpose);
  h.from_rank = from;
  h.to_rank = to;
  h.world_size = world_size;
  std::memcpy(h.token, token.data(), std::min(token.size(), kTokenBytes));
  return h;
}

std::optional<std::string> validate_frame(std::span<const std::byte> bytes) {
  if (bytes.size() < sizeof(FrameHeader))
    return fmt::format("truncated frame header ({} of {} bytes)", bytes.size(),
                       sizeof(FrameHeader));
  FrameHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.magic != kFrameMagic) return fmt::format("bad frame magic {:#010x}", h.magic);
  if (h.version != kWireVersion)
    return fmt::format("unsupported wire version {} (this build speaks {})", h.version,
                       kWireVersion);
  switch (static_cast<FrameType>(h.type)) {
    case FrameType::data:
      if (h.length > kMaxFrameLength)
        return fmt::format("frame length {} exceeds the limit {}", h.length, kMaxFrameLength);
      break;
    case FrameType::goodbye:
      if (h.length != 0) return fmt::format("goodbye frame with length {}", h.length);
      break;
    case FrameType::announce:
      if (h.length != 0) return fmt::format("announce frame with length {}", h.length);
      break;
    case FrameType::status:
      if (h.length != sizeof(StatusPayload))
        return fmt::format("status frame with length {} (not {})", h.length, sizeof(StatusPayload));
      break;
    case FrameType::ask:
      if (h.length != 0) return fmt::format("ask frame with length {}", h.length);
      break;
    case FrameType::answer:
      if (h.length > kMaxAnswerLength)
        return fmt::format("answer of {} bytes exceeds {}", h.length, kMaxAnswerLength);
      if (!(h.flags & kAnswerFinished) && h.length != 0)
        return fmt::format("an answer of {} bytes for a call not finished", h.length);
      break;
    case FrameType::abort:
      if (h.length > kMaxAbortReason)
        return fmt::format("abort reason of {} bytes exceeds {}", h.length, kMaxAbortReason);
      break;
    default:
      return fmt::format("unknown frame type {}", h.type);
  }
  return std::nullopt;
}

std::optional<std::string> validate_hello(std::span<const std::byte> bytes, std::string_view token,
                                          int my_rank, int world_size) {
  if (bytes.size() < sizeof(Hello))
    return fmt::format("truncated hello ({} of {} bytes)", bytes.size(), sizeof(Hello));
  Hello h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.magic != kHelloMagic) return fmt::format("bad hello magic {:#010x}", h.magic);
  if (h.version != kWireVersion) return fmt::format("unsupported wire version {}", h.version);
  if (h.world_size != world_size)
    return fmt::format("peer believes the world has {} ranks, not {}", h.world_size, world_size);
  if (h.to_rank != my_rank) return fmt::format("hello addressed to rank {}", h.to_rank);
  if (h.from_rank < 0 || h.from_rank >= world_size)
    return fmt::format("hello from invalid rank {}", h.from_rank);
  std::string_view theirs(h.token, strnlen(h.token, kTokenBytes));
  std::string_view mine = token.substr(0, std::min(token.size(), kTokenBytes));
  if (theirs.size() != mine.size() || std::memcmp(theirs.data(), mine.data(), mine.size()) != 0)
    return std::string("wrong job token");
  return std::nullopt;
}

}  // namespace chorus::tcp
