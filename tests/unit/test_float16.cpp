// float32 to and from float16 and bfloat16 (base/core/half.hpp): every
// 16-bit pattern decodes exactly and round-trips; rounding to nearest even
// at every tie, against the reference of ref_float16.hpp (and, hidden, every
// float against F16C).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "base/core/dtype.hpp"
#include "tests/unit/ref_float16.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TEST_HAVE_X86 1
#else
#define TEST_HAVE_X86 0
#endif

using namespace chorus;
using namespace chorus::test;

TEST_CASE("f16: all 65536 bit patterns decode exactly and round-trip", "[dtype][f16]") {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = half_to_float(h);
    const double want = ref_decode(h, kHalf);
    if (kHalf.is_nan(h)) {
      INFO(fmt::format("{:#06x}", i));
      REQUIRE(std::isnan(f));
      REQUIRE(kHalf.is_nan(float_to_half(f)));
      CHECK(std::signbit(f) == ((h & 0x8000) != 0));
      continue;
    }
    if (static_cast<double>(f) != want || std::signbit(f) != std::signbit(want) ||
        float_to_half(f) != h) {
      FAIL(fmt::format("{:#06x}: decoded {} want {}, re-encoded {:#06x}", i, f, want,
                       float_to_half(f)));
    }
  }
}

TEST_CASE("bf16: all 65536 bit patterns decode exactly and round-trip", "[dtype][bf16]") {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto b = static_cast<uint16_t>(i);
    const float f = bf16_to_float(b);
    const double want = ref_decode(b, kBf16);
    if (kBf16.is_nan(b)) {
      INFO(fmt::format("{:#06x}", i));
      REQUIRE(std::isnan(f));
      REQUIRE(kBf16.is_nan(float_to_bf16(f)));
      continue;
    }
    if (static_cast<double>(f) != want || std::signbit(f) != std::signbit(want) ||
        float_to_bf16(f) != b) {
      FAIL(fmt::format("{:#06x}: decoded {} want {}, re-encoded {:#06x}", i, f, want,
                       float_to_bf16(f)));
    }
  }
}

namespace {

// float -> 16-bit against the reference on: every float whose low bits (below
// the 16-bit format's precision) are one of a set of patterns around the tie,
// for all high bit combinations; plus random floats.
template <class Encode>
void check_rounding(Format fmt16, Encode encode, int low_bits) {
  const uint32_t low_mask = (1u << low_bits) - 1;
  const uint32_t half = 1u << (low_bits - 1);
  std::mt19937 rng(7);
  int failures = 0;
  for (uint64_t high = 0; high < (uint64_t{1} << (32 - low_bits)); ++high) {
    const uint32_t lows[] = {
        0, 1, half - 1, half, half + 1, low_mask, static_cast<uint32_t>(rng()) & low_mask};
    for (uint32_t low : lows) {
      const uint32_t bits = static_cast<uint32_t>(high << low_bits) | low;
      const float f = bits_of<float>(bits);
      const uint16_t got = encode(f);
      const uint16_t want = ref_encode(f, fmt16);
      const bool ok = std::isnan(f) ? fmt16.is_nan(got) : got == want;
      if (!ok && ++failures <= 5)
        FAIL_CHECK(fmt::format("{:#010x} ({}): got {:#06x} want {:#06x}", bits, f, got, want));
    }
  }
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t bits = rng();
    const float f = bits_of<float>(bits);
    const uint16_t got = encode(f);
    const uint16_t want = ref_encode(f, fmt16);
    const bool ok = std::isnan(f) ? fmt16.is_nan(got) : got == want;
    if (!ok && ++failures <= 10)
      FAIL_CHECK(fmt::format("{:#010x} ({}): got {:#06x} want {:#06x}", bits, f, got, want));
  }
  CHECK(failures == 0);
}

}  // namespace

TEST_CASE("float -> f16 rounds to nearest even", "[dtype][f16]") {
  // Exact midpoints between every pair of adjacent finite halves (including the
  // subnormal ones and 65504..65536), and one float either side of them.
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const double lo = ref_decode(static_cast<uint16_t>(h), kHalf);
    const double hi = h + 1 == 0x7C00 ? 65536.0 : ref_decode(static_cast<uint16_t>(h + 1), kHalf);
    const auto mid = static_cast<float>((lo + hi) / 2);  // exact: 12 significant bits
    REQUIRE(static_cast<double>(mid) == (lo + hi) / 2);
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    for (float sign : {1.0f, -1.0f}) {
      const uint16_t s = sign < 0 ? 0x8000 : 0;
      INFO(fmt::format("between {:#06x} and {:#06x}", h, h + 1));
      CHECK(float_to_half(sign * mid) == (s | even));
      CHECK(ref_encode(sign * mid, kHalf) == (s | even));
      CHECK(float_to_half(sign * std::nextafter(mid, 0.0f)) == (s | h));
      CHECK(float_to_half(sign * std::nextafter(mid, 1e30f)) == (s | (h + 1)));
    }
  }
  CHECK(float_to_half(65519.996f) == 0x7BFF);
  CHECK(float_to_half(65520.0f) == 0x7C00);
  CHECK(float_to_half(1e30f) == 0x7C00);
  CHECK(float_to_half(-std::numeric_limits<float>::infinity()) == 0xFC00);
  CHECK(float_to_half(0x1p-25f) == 0x0000);                        // tie to even (zero)
  CHECK(float_to_half(std::nextafter(0x1p-25f, 1.0f)) == 0x0001);  // just above the tie
  CHECK(float_to_half(0x1.8p-24f) == 0x0002);                      // tie 1.5 -> 2
  CHECK(float_to_half(-0.0f) == 0x8000);
  CHECK(float_to_half(std::numeric_limits<float>::denorm_min()) == 0x0000);
  check_rounding(
      kHalf, [](float f) { return float_to_half(f); }, 13);
}

TEST_CASE("float -> bf16 rounds to nearest even", "[dtype][bf16]") {
  CHECK(float_to_bf16(1.0f) == 0x3F80);
  CHECK(float_to_bf16(bits_of<float>(0x3F808000u)) == 0x3F80);  // tie, even stays
  CHECK(float_to_bf16(bits_of<float>(0x3F818000u)) == 0x3F82);  // tie, odd rounds up
  CHECK(float_to_bf16(bits_of<float>(0x7F7FFFFFu)) == 0x7F80);  // max float -> inf
  CHECK(float_to_bf16(bits_of<float>(0x7F7F7FFFu)) == 0x7F7F);
  CHECK(float_to_bf16(bits_of<float>(0x00008000u)) == 0x0000);  // subnormal tie -> 0
  CHECK(float_to_bf16(bits_of<float>(0x00018000u)) == 0x0002);
  CHECK(float_to_bf16(-0.0f) == 0x8000);
  // A NaN whose payload lies only in the low 16 bits must stay NaN.
  CHECK(kBf16.is_nan(float_to_bf16(bits_of<float>(0x7F800001u))));
  CHECK(kBf16.is_nan(float_to_bf16(bits_of<float>(0xFF80FFFFu))));
  check_rounding(
      kBf16, [](float f) { return float_to_bf16(f); }, 16);
}

#if TEST_HAVE_X86
namespace {
__attribute__((target("f16c"))) uint16_t hw_float_to_half(float f) {
  return static_cast<uint16_t>(
      _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
}  // namespace

// Hidden (run with: unit_tests "[.exhaustive]"): every float, against F16C and
// against the reference rounding for bf16. Takes minutes.
TEST_CASE("exhaustive float -> f16/bf16", "[.exhaustive]") {
  __builtin_cpu_init();
  const bool f16c = __builtin_cpu_supports("f16c");
  uint64_t bad_half = 0, bad_bf16 = 0;
  for (uint64_t i = 0; i < (uint64_t{1} << 32); ++i) {
    const float f = bits_of<float>(static_cast<uint32_t>(i));
    if (f16c) {
      const uint16_t got = float_to_half(f), want = hw_float_to_half(f);
      if (got != want && !(kHalf.is_nan(got) && kHalf.is_nan(want))) ++bad_half;
    }
    if ((i & 0xFFF) == 0 || (i & 0xFFFF) == 0x8000) {  // the reference is slow: sample
      const uint16_t got = float_to_bf16(f), want = ref_encode(f, kBf16);
      if (got != want && !(std::isnan(f) && kBf16.is_nan(got))) ++bad_bf16;
    }
  }
  CHECK(bad_half == 0);
  CHECK(bad_bf16 == 0);
}
#endif
