// Wire format of the UCX transport: how a message is named by its 64-bit UCX
// tag, and the headers that travel in front of the data. Everything received
// is untrusted and validated here before use.
//
// UCX tag (64 bits):
//   [63:62] kind: lead (0), bulk (1) or control (2)
//   [61:32] rank of the sender (so ranks up to 2^30)
//   [31:0]  the transport tag of the message (data), the control type (control)
// Receives match one (kind, sender, tag) exactly: UCX then matches the
// messages of one sender and tag in the order both sides issued them.
//
// A data message is a lead (kind lead) that starts with a LeadHeader, and for
// large data a separate bulk message (kind bulk, same sender and tag) that is
// nothing but the user's bytes:
//   small:  lead = [LeadHeader | data]      (one IOV send, flags 0)
//   large:  lead = [LeadHeader]             (flags kFlagBulk, length = data size)
//           bulk = [data]                   (contiguous: UCX rendezvous, zero-copy)
// Control messages (hello, goodbye, abort) are a ControlHeader and, for an
// abort, the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/core/contract.hpp"

namespace chorus::ucx {

enum class TagKind : uint64_t { lead = 0, bulk = 1, control = 2 };

inline constexpr int kRankBits = 30;
inline constexpr int kMaxRanks = 1 << kRankBits;
inline constexpr uint64_t kFullMask = ~uint64_t(0);
inline constexpr uint64_t kKindMask = uint64_t(3) << 62;

constexpr uint64_t make_tag(TagKind kind, int rank, uint32_t value) {
  return (static_cast<uint64_t>(kind) << 62) |
         ((static_cast<uint64_t>(static_cast<uint32_t>(rank)) & (kMaxRanks - 1)) << 32) | value;
}
constexpr TagKind tag_kind(uint64_t tag) {
  return static_cast<TagKind>(tag >> 62);
}
constexpr int tag_rank(uint64_t tag) {
  return static_cast<int>((tag >> 32) & (kMaxRanks - 1));
}
constexpr uint32_t tag_value(uint64_t tag) {
  return static_cast<uint32_t>(tag);
}

inline constexpr uint32_t kLeadMagic = 0x4c584843;     // "CHXL"
inline constexpr uint32_t kControlMagic = 0x43584843;  // "CHXC"
inline constexpr uint16_t kWireVersion = 1;
inline constexpr uint16_t kFlagBulk = 1;  // the data follows as a bulk message
inline constexpr std::size_t kMaxReason = 4096;
// A corrupt length must not make a rank expect terabytes.
inline constexpr uint64_t kMaxMessage = uint64_t(1) << 40;

struct LeadHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t flags;
  uint64_t job;     // job_hash(token): a message from another job is refused
  uint64_t length;  // bytes of data in this message (or in its bulk message)
  CallSignature sig;
};
static_assert(sizeof(LeadHeader) == 56);

enum class ControlType : uint16_t { hello = 1, goodbye = 2, abort = 3 };

struct ControlHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t type;  // ControlType
  uint64_t job;
  int32_t code;         // abort: the chorus_result_t of the first failure
  uint32_t length;      // abort: bytes of reason after the header
  int64_t pid;          // hello: the sender's process id ...
  uint64_t start_time;  // ... and its start time (clock ticks after boot)
  char boot_id[40];     // hello: the sender's host boot id, NUL-padded
};
static_assert(sizeof(ControlHeader) == 80);

struct ControlMessage {
  ControlHeader header;
  char reason[kMaxReason];
};

// FNV-1a of the job token.
uint64_t job_hash(std::string_view token);

LeadHeader make_lead(uint64_t job, uint64_t length, bool bulk, const CallSignature& sig);
ControlHeader make_control(ControlType type, uint64_t job);

// nullopt when acceptable. `received` is how many bytes UCX delivered for the
// message (header included).
std::optional<std::string> validate_lead(const LeadHeader& header, std::size_t received,
                                         uint64_t job);
std::optional<std::string> validate_control(const ControlHeader& header, std::size_t received,
                                            uint64_t job);

}  // namespace chorus::ucx
