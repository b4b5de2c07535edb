// Fuzz target: the UCX transport's lead and control headers
// (transports/ucx/ucx_wire.hpp).
// Feeds: the input as one message UCX delivered, both as a data lead (its
// first 56 bytes, zero-padded, are the LeadHeader; `received` is the input
// size) to validate_lead, and, when it fits the posted receive
// (ControlMessage: header and up to kMaxReason bytes of reason), as a control
// message to validate_control; an accepted abort's reason then goes to
// decode_notice, as transports/ucx/ucx_control.cpp does. The job is
// job_hash(kToken).
// Checks: both validators accept exactly what an independent reference
// accepts (lead: magic, version, job, only the bulk flag, length up to
// kMaxMessage, a bulk lead is a bare header announcing > 0 bytes, otherwise
// the data that arrived is `length`; control: magic, version, job, known type,
// reason up to kMaxReason and exactly the bytes that arrived); make_lead
// rebuilds an accepted lead byte for byte, make_control its common fields;
// abort notices decode as their layout says and encode_notice(decoded) gives
// back the same bytes (fuzz_check.hpp).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "tests/fuzz/fuzz_check.hpp"
#include "transports/ucx/ucx_wire.hpp"

using namespace chorus;
using namespace chorus::ucx;

namespace {

constexpr std::string_view kToken = "fuzz-job-token";

bool lead_ok(const LeadHeader& h, std::size_t received, uint64_t job) {
  if (received < sizeof(LeadHeader)) return false;
  if (h.magic != kLeadMagic || h.version != kWireVersion || h.job != job) return false;
  if (h.flags != 0 && h.flags != kFlagBulk) return false;
  if (h.length > kMaxMessage) return false;
  if (h.flags == kFlagBulk) return received == sizeof(LeadHeader) && h.length > 0;
  return received - sizeof(LeadHeader) == h.length;
}

bool control_ok(const ControlHeader& h, std::size_t received, uint64_t job) {
  if (received < sizeof(ControlHeader)) return false;
  if (h.magic != kControlMagic || h.version != kWireVersion || h.job != job) return false;
  if (h.type < 1 || h.type > 3) return false;
  return h.length <= kMaxReason && received == sizeof(ControlHeader) + h.length;
}

void check_lead(const uint8_t* data, std::size_t size, uint64_t job) {
  LeadHeader h{};
  std::memcpy(&h, data, std::min(size, sizeof h));
  const auto error = validate_lead(h, size, job);
  FUZZ_CHECK(error.has_value() != lead_ok(h, size, job));
  if (error) {
    FUZZ_CHECK(!error->empty());
    return;
  }
  FUZZ_CHECK(h.length <= kMaxMessage);
  const bool bulk = h.flags & kFlagBulk;
  FUZZ_CHECK(bulk ? size == sizeof h : size == sizeof h + h.length);
  const LeadHeader made = make_lead(job, h.length, bulk, h.sig);
  FUZZ_CHECK(std::memcmp(&made, &h, sizeof h) == 0);
}

void check_control(const uint8_t* data, std::size_t size, uint64_t job) {
  if (size > sizeof(ControlMessage)) return;  // UCX would truncate it: never handled
  // The posted receive buffer, reused: whatever an earlier message left in it
  // must not matter (here: a fill pattern).
  static auto msg = std::make_unique<ControlMessage>();
  std::memset(msg.get(), 0xa5, sizeof *msg);
  std::memcpy(msg.get(), data, size);
  const ControlHeader& h = msg->header;
  const auto error = validate_control(h, size, job);
  FUZZ_CHECK(error.has_value() != control_ok(h, size, job));
  if (error) {
    FUZZ_CHECK(!error->empty());
    return;
  }
  FUZZ_CHECK(h.length <= kMaxReason && size == sizeof h + h.length);
  const ControlHeader made = make_control(static_cast<ControlType>(h.type), job);
  FUZZ_CHECK(made.magic == h.magic && made.version == h.version && made.type == h.type &&
             made.job == h.job);
  if (static_cast<ControlType>(h.type) == ControlType::abort) {
    // The reason lies wholly in what arrived.
    fuzz::check_notice({msg->reason, h.length}, kMaxReason,
                       static_cast<uint64_t>(h.pid) % (kMaxReason + 1));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const uint64_t job = job_hash(kToken);
  check_lead(data, size, job);
  check_control(data, size, job);
  return 0;
}
