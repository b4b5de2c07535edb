// Shared by the fuzz targets of tests/fuzz: FUZZ_CHECK, which aborts (libFuzzer
// then saves the input as a crash-* artifact and exits non-zero), and the
// failure-notice properties (transports/transport.hpp) that the TCP abort
// frame and the UCX abort control message both carry.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "transports/transport.hpp"

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

namespace chorus::fuzz {

// `payload` is a notice as received in a message of at most `max_bytes` of
// reason. Checks decode_notice against the layout (u32 count, count x (u32
// space, u64 finished), message), that encode_notice(decoded) gives the same
// bytes back, and that encoding into a smaller limit `cut` (>= 4) cuts the
// message and keeps the entries only when they fit, as documented.
inline void check_notice(std::string_view payload, std::size_t max_bytes, std::size_t cut) {
  constexpr std::size_t kEntry = sizeof(uint32_t) + sizeof(uint64_t);
  std::string message = "untouched";
  Spared spared;
  const bool ok = decode_notice(payload, message, spared);

  // Reference: what the layout allows.
  uint32_t count = 0;
  if (payload.size() >= 4) std::memcpy(&count, payload.data(), 4);
  const bool well_formed = payload.size() >= 4 && count <= (payload.size() - 4) / kEntry;
  FUZZ_CHECK(ok == well_formed);
  if (!ok) return;

  FUZZ_CHECK(spared.entries.size() == count);
  FUZZ_CHECK(message.size() == payload.size() - 4 - count * kEntry);
  FUZZ_CHECK(message == payload.substr(4 + count * kEntry));
  for (std::size_t i = 0; i < count; ++i) {
    uint32_t space;
    uint64_t finished;
    std::memcpy(&space, payload.data() + 4 + i * kEntry, sizeof space);
    std::memcpy(&finished, payload.data() + 4 + i * kEntry + sizeof space, sizeof finished);
    FUZZ_CHECK(spared.entries[i].space == space && spared.entries[i].finished == finished);
  }

  // Exact round trip: the notice fits max_bytes, so nothing is cut.
  FUZZ_CHECK(payload.size() <= max_bytes);
  const std::string again = encode_notice(message, spared, max_bytes);
  FUZZ_CHECK(again == payload);
  std::string message2;
  Spared spared2;
  FUZZ_CHECK(decode_notice(again, message2, spared2));
  FUZZ_CHECK(message2 == message && spared2 == spared);

  // A smaller limit: at most `cut` bytes, still a notice; the entries are
  // kept whole or dropped, the message is a prefix.
  cut = std::max<std::size_t>(cut, 4);
  const std::string small = encode_notice(message, spared, cut);
  FUZZ_CHECK(small.size() <= cut);
  FUZZ_CHECK(decode_notice(small, message2, spared2));
  const bool entries_fit = 4 + count * kEntry <= cut;
  FUZZ_CHECK(entries_fit ? spared2 == spared : spared2.entries.empty());
  const std::size_t room = cut - 4 - (entries_fit ? count * kEntry : 0);
  FUZZ_CHECK(message2 == std::string_view(message).substr(0, room));
}

}  // namespace chorus::fuzz
