// Streaming copies (base/core/memcopy.hpp) against memcpy: every small size
// and misalignment of source and destination, and a large copy.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/core/memcopy.hpp"

using namespace chorus;

namespace {
std::vector<std::byte> pattern(std::size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::byte(static_cast<uint8_t>((i * 131 + seed) >> 3));
  return v;
}
}  // namespace

TEST_CASE("copy_streaming copies exactly the bytes asked, at any alignment", "[memcopy]") {
  auto src = pattern(4096, 7);
  for (std::size_t src_off = 0; src_off < 16; ++src_off)
    for (std::size_t dst_off = 0; dst_off < 16; ++dst_off)
      for (std::size_t n : {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 200, 1000, 2049}) {
        std::vector<std::byte> dst(4096 + 32, std::byte{0xEE});
        copy_streaming(dst.data() + dst_off, src.data() + src_off, n);
        streaming_fence();
        INFO("src+" << src_off << " dst+" << dst_off << " bytes " << n);
        REQUIRE(std::memcmp(dst.data() + dst_off, src.data() + src_off, n) == 0);
        std::size_t touched_outside = 0;
        for (std::size_t i = 0; i < dst.size(); ++i)
          if ((i < dst_off || i >= dst_off + n) && dst[i] != std::byte{0xEE}) ++touched_outside;
        REQUIRE(touched_outside == 0);
      }
}

TEST_CASE("copy_streaming of several MiB", "[memcopy]") {
  auto src = pattern((8 << 20) + 3, 11);
  std::vector<std::byte> dst(src.size() + 1, std::byte{0});
  copy_streaming(dst.data() + 1, src.data(), src.size());
  streaming_fence();
  REQUIRE(std::memcmp(dst.data() + 1, src.data(), src.size()) == 0);
}
