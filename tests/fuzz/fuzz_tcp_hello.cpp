// Fuzz target: the TCP transport's connection hello (transports/tcp/wire.hpp).
// Feeds: validate_hello(bytes, token, my_rank, world_size) with an input of
//   88-byte Hello | i32 world_size | i32 my_rank | job token (rest)
// (shorter inputs: the Hello bytes only, and world 4, rank 1, a fixed token).
// Checks: validate_hello accepts exactly what an independent reference
// accepts (magic, version, world size, addressed to my_rank, sender rank in
// [0, world), NUL-padded token equal to the first kTokenBytes of ours), looks
// only at the first 88 bytes, never accepts a truncated hello, and the hello
// make_hello builds for the accepted sender is accepted as well.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "tests/fuzz/fuzz_check.hpp"
#include "transports/tcp/wire.hpp"

using namespace chorus::tcp;

namespace {

bool reference_accepts(const Hello& h, std::string_view token, int my_rank, int world_size) {
  if (h.magic != kHelloMagic || h.version != kWireVersion) return false;
  if (h.world_size != world_size || h.to_rank != my_rank) return false;
  if (h.from_rank < 0 || h.from_rank >= world_size) return false;
  std::size_t theirs = 0;
  while (theirs < kTokenBytes && h.token[theirs] != '\0') ++theirs;
  const std::string_view mine = token.substr(0, kTokenBytes);
  return std::string_view(h.token, theirs) == mine;
}

std::span<const std::byte> as_bytes(const Hello& h) {
  return {reinterpret_cast<const std::byte*>(&h), sizeof h};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int32_t world_size = 4;
  int32_t my_rank = 1;
  std::string_view token = "fuzz-job-token";
  std::size_t hello_bytes = size;
  if (size >= sizeof(Hello) + 8) {
    std::memcpy(&world_size, data + sizeof(Hello), 4);
    std::memcpy(&my_rank, data + sizeof(Hello) + 4, 4);
    token = std::string_view(reinterpret_cast<const char*>(data) + sizeof(Hello) + 8,
                             size - sizeof(Hello) - 8);
    hello_bytes = sizeof(Hello);
  }
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), hello_bytes);
  const auto error = validate_hello(bytes, token, my_rank, world_size);
  if (hello_bytes < sizeof(Hello)) {
    FUZZ_CHECK(error.has_value());
    return 0;
  }
  // Bytes after the Hello are not looked at.
  FUZZ_CHECK(validate_hello({reinterpret_cast<const std::byte*>(data), size}, token, my_rank,
                            world_size) == error);

  Hello h;
  std::memcpy(&h, data, sizeof h);
  FUZZ_CHECK(error.has_value() != reference_accepts(h, token, my_rank, world_size));
  if (error) return 0;

  FUZZ_CHECK(h.from_rank >= 0 && h.from_rank < world_size && h.to_rank == my_rank);
  FUZZ_CHECK(std::memchr(token.data(), 0, std::min(token.size(), kTokenBytes)) == nullptr);
  // What the sender's encoder makes for this connection is accepted too.
  const Hello made = make_hello(token, h.from_rank, my_rank, world_size);
  FUZZ_CHECK(!validate_hello(as_bytes(made), token, my_rank, world_size));
  FUZZ_CHECK(made.magic == h.magic && made.version == h.version &&
             std::strncmp(made.token, h.token, kTokenBytes) == 0);
  return 0;
}
