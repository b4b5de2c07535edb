// Fuzz target: TCP transport frames (transports/tcp/wire.hpp).
// Feeds: the bytes a rank reads from a peer's connection, a 56-byte
// FrameHeader and then its payload, to validate_frame; after an accepted
// abort frame, its `length` payload bytes (when present) to decode_notice.
// Checks: validate_frame accepts exactly what the format allows (independent
// reference: magic, version, known type, the per-type length rule: data up to
// kMaxFrameLength, goodbye/announce/ask 0, status one StatusPayload, abort up to
// kMaxAbortReason, answer up to 1 MiB and only with its finished flag), looks at the header only,
// and make_frame rebuilds an accepted header byte for byte; abort notices decode as their layout
// says and encode_notice(decoded) gives back the same bytes (fuzz_check.hpp).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "tests/fuzz/fuzz_check.hpp"
#include "transports/tcp/wire.hpp"

using namespace chorus;
using namespace chorus::tcp;

namespace {

bool reference_accepts(const FrameHeader& h) {
  if (h.magic != kFrameMagic || h.version != kWireVersion) return false;
  switch (h.type) {
    case 1:  // data
      return h.length <= kMaxFrameLength;
    case 2:  // goodbye
    case 4:  // announce
    case 6:  // ask
      return h.length == 0;
    case 7:  // answer: a result only when finished (flag bit 0)
      return (h.flags & 1) ? h.length <= (uint64_t(1) << 20) : h.length == 0;
    case 5:  // status
      return h.length == sizeof(StatusPayload);
    case 3:  // abort
      return h.length <= kMaxAbortReason;
    default:
      return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const auto error = validate_frame(bytes);
  if (size < sizeof(FrameHeader)) {
    FUZZ_CHECK(error.has_value());
    return 0;
  }
  FUZZ_CHECK(!error || !error->empty());
  // Only the header counts: what follows it is payload.
  FUZZ_CHECK(validate_frame(bytes.first(sizeof(FrameHeader))) == error);

  FrameHeader h;
  std::memcpy(&h, data, sizeof h);
  FUZZ_CHECK(error.has_value() != reference_accepts(h));
  if (error) return 0;

  FUZZ_CHECK(h.length <= kMaxFrameLength);
  // The encoder writes exactly this header (flags and reserved are always 0).
  FrameHeader made = make_frame(static_cast<FrameType>(h.type), h.tag, h.length, h.sig);
  made.flags = h.flags;
  made.reserved = h.reserved;
  FUZZ_CHECK(std::memcmp(&made, &h, sizeof h) == 0);

  const std::size_t available = size - sizeof(FrameHeader);
  if (h.type == static_cast<uint8_t>(FrameType::abort) && available >= h.length) {
    FUZZ_CHECK(h.length <= kMaxAbortReason);
    const std::string_view payload(reinterpret_cast<const char*>(data) + sizeof(FrameHeader),
                                   h.length);
    // The tag (the failure's code on the wire) picks a smaller limit to re-encode into.
    fuzz::check_notice(payload, kMaxAbortReason, h.tag % (kMaxAbortReason + 1));
  }
  return 0;
}
