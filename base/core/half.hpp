// The scalar float16 / bfloat16 <-> float32 conversions, inline, for the
// loops that use them (dtype.cpp's reduce kernels, convert.cpp's bulk
// converters). Internal to base/core; everyone else calls the functions of
// dtype.hpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CHORUS_HALF_AVX2 1
#define CHORUS_AVX2 __attribute__((target("avx2,f16c")))
#else
#define CHORUS_HALF_AVX2 0
#endif

#define CHORUS_INLINE inline __attribute__((always_inline))

namespace chorus::half_impl {

CHORUS_INLINE uint32_t f2u(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
CHORUS_INLINE float u2f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// c ? x : y, written with masks. With -ftrapping-math (GCC's default) a plain
// ?: between two floating-point results lets GCC sink each computation into
// its branch, and a loop with such control flow is not vectorised; masks keep
// both computations unconditional.
CHORUS_INLINE uint32_t select_bits(bool c, uint32_t x, uint32_t y) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return (x & m) | (y & ~m);
}

// ---- f16 / bf16 conversions (branch-free so that loops over them vectorise) ----

// binary16 -> binary32, exact (after Maratyszcza's FP16 library).
//  - Normal inputs (and exponent 31): exponent and mantissa are shifted into
//    float position with the exponent rebased by +224, then one exact
//    multiplication by 2^-112 gives the bias change 127 - 15 = 112. Exponent 31
//    becomes 255 (inf/NaN) and stays so.
//  - Subnormal inputs and zero: 0.5 + m * 2^-24 is built from bits and 0.5
//    subtracted, which is exact.
//  - NaN is rebuilt explicitly as a quiet NaN with the payload kept (what
//    F16C's vcvtph2ps does), independent of how the FPU treats NaN operands.
CHORUS_INLINE float half_to_float_impl(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;  // exponent and mantissa at the top, sign shifted out
  const float normalized = u2f((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = u2f((two_w >> 17) | (126u << 23)) - 0.5f;
  uint32_t bits = select_bits(two_w < (1u << 27), f2u(denormalized), f2u(normalized));
  const bool is_nan = (h & 0x7FFFu) > 0x7C00u;
  bits = select_bits(is_nan, 0x7FC00000u | ((h & 0x03FFu) << 13), bits);
  return u2f(sign | bits);
}

// binary32 -> binary16, round to nearest even (after Maratyszcza's FP16
// library). |f| * 2^112 * 2^-110 is 4|f| for values in the half range and
// infinity past it. Adding 2^(max(e, -14) + 15) (built from f's exponent e, with
// a floor at the smallest normal half exponent) leaves the FPU exactly 10
// mantissa bits below the leading one of the half result, so the addition
// itself rounds to nearest even, for normal and subnormal results alike; the
// sum's exponent and mantissa bits then read off as the half's. NaN becomes a
// quiet NaN with the top payload bits kept (as vcvtps2ph does).
CHORUS_INLINE uint16_t float_to_half_impl(float f) {
  float base = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t w = f2u(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  // f's exponent field in place; below 2^-14 (biased 113) clamp to 113.
  int32_t bias = static_cast<int32_t>(w & 0x7F800000u);
  bias = bias < 0x38800000 ? 0x38800000 : bias;
  base = u2f(static_cast<uint32_t>(bias) + 0x07800000u) + base;
  const uint32_t bits = f2u(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  const uint32_t nan = 0x7E00u | ((w >> 13) & 0x03FFu);
  return static_cast<uint16_t>((sign >> 16) | select_bits(shl1_w > 0xFF000000u, nan, nonsign));
}

CHORUS_INLINE float bf16_to_float_impl(uint16_t b) {
  return u2f(static_cast<uint32_t>(b) << 16);
}

CHORUS_INLINE uint16_t float_to_bf16_impl(float f) {
  const uint32_t x = f2u(f);
  const uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;  // carries into exp: RNE
  const uint32_t nan = (x >> 16) | 0x0040u;                         // quiet, payload top kept
  const bool is_nan = (x & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<uint16_t>(is_nan ? nan : rounded);
}

#if CHORUS_HALF_AVX2
// float_to_bf16_impl on eight 32-bit lanes (the float bits); the results are
// in the low 16 bits of each lane, the high bits zero (so that
// _mm256_packus_epi32 packs them exactly).
CHORUS_AVX2 CHORUS_INLINE __m256i round_bf16_lanes(__m256i x) {
  const __m256i halfway = _mm256_set1_epi32(0x7FFF);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, halfway),
                                         _mm256_and_si256(_mm256_srli_epi32(x, 16), one)),
                        16);
  const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x0040));
  const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF)),
                                            _mm256_set1_epi32(0x7F800000));
  return _mm256_blendv_epi8(rounded, nan, is_nan);
}

// Sixteen float32 results (two vectors) rounded to bf16 and stored in order.
CHORUS_AVX2 CHORUS_INLINE void store_bf16x16(uint16_t* d, __m256i lo, __m256i hi) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d),
                      _mm256_permute4x64_epi64(
                          _mm256_packus_epi32(round_bf16_lanes(lo), round_bf16_lanes(hi)), 0xD8));
}

// Eight bf16 values widened to float32 (exact).
CHORUS_AVX2 CHORUS_INLINE __m256 load_bf16x8(const uint16_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(
      _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}
#endif

}  // namespace chorus::half_impl
