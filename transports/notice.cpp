// Failure notices on the wire (transport.hpp: encode_notice / decode_notice):
// what TCP abort frames and UCX abort control messages carry. Apart from the
// rest of the transport layer so that the fuzz targets (tests/fuzz) build it
// alone.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "transports/transport.hpp"

namespace chorus {

// Layout: u32 entry count, then per entry u32 space and u64 finished (host
// order: both ends are this build on one kind of machine, as every frame
// header), then the message.
std::string encode_notice(const std::string& message, const Spared& spared, std::size_t max_bytes) {
  constexpr std::size_t kEntry = sizeof(uint32_t) + sizeof(uint64_t);
  std::size_t n = spared.entries.size();
  if (max_bytes < sizeof(uint32_t)) return {};  // not even the count fits: no notice at all
  if (sizeof(uint32_t) + n * kEntry > max_bytes) n = 0;  // spare nothing rather than cut the list
  std::string out;
  auto put = [&](const auto& v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(static_cast<uint32_t>(n));
  for (std::size_t i = 0; i < n; ++i) {
    put(spared.entries[i].space);
    put(spared.entries[i].finished);
  }
  out += message.substr(0, max_bytes - out.size());
  return out;
}

bool decode_notice(std::string_view payload, std::string& message, Spared& spared) {
  constexpr std::size_t kEntry = sizeof(uint32_t) + sizeof(uint64_t);
  uint32_t n = 0;
  if (payload.size() < sizeof n) return false;
  std::memcpy(&n, payload.data(), sizeof n);
  if (n > (payload.size() - sizeof n) / kEntry) return false;
  spared.entries.assign(n, {});
  const char* at = payload.data() + sizeof n;
  for (auto& e : spared.entries) {
    std::memcpy(&e.space, at, sizeof e.space);
    std::memcpy(&e.finished, at + sizeof e.space, sizeof e.finished);
    at += kEntry;
  }
  message.assign(at, payload.data() + payload.size());
  return true;
}

}  // namespace chorus
