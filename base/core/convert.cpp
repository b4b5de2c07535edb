// Bulk float32 <-> bfloat16 / float16 conversions (dtype.hpp): what
// compression on the wire runs before and after an allreduce. Plain loops
// over the scalar conversions of half.hpp, compiled for the baseline ISA and
// for AVX2 (+F16C for float16, as the hardware conversions with the rounding
// immediate); both give the scalar functions' bits (NaN stays NaN).
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>

#include "base/core/dtype.hpp"
#include "base/core/error.hpp"
#include "base/core/half.hpp"

#define CHORUS_CONVERT_X86 CHORUS_HALF_AVX2  // half.hpp

namespace chorus {
namespace {

using namespace half_impl;

CHORUS_INLINE void narrow_bf16(const float* __restrict src, uint16_t* __restrict dst,
                               std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    // float_to_bf16_impl written with masks, so that the loop vectorises.
    const uint32_t x = f2u(src[i]);
    const uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
    const uint32_t nan = (x >> 16) | 0x0040u;
    dst[i] = static_cast<uint16_t>(select_bits((x & 0x7FFFFFFFu) > 0x7F800000u, nan, rounded));
  }
}

CHORUS_INLINE void widen_bf16(const uint16_t* __restrict src, float* __restrict dst,
                              std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_float_impl(src[i]);
}

CHORUS_INLINE void widen_bf16_div(const uint16_t* __restrict src, float* __restrict dst,
                                  std::size_t n, float div) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_float_impl(src[i]) / div;
}

CHORUS_INLINE void narrow_f16(const float* __restrict src, uint16_t* __restrict dst,
                              std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = float_to_half_impl(src[i]);
}

CHORUS_INLINE void widen_f16(const uint16_t* __restrict src, float* __restrict dst, std::size_t n,
                             float div) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = half_to_float_impl(src[i]) / div;
}

struct Converters {
  void (*narrow_bf16)(const float*, uint16_t*, std::size_t);
  void (*widen_bf16)(const uint16_t*, float*, std::size_t);
  void (*widen_bf16_div)(const uint16_t*, float*, std::size_t, float);
  void (*narrow_f16)(const float*, uint16_t*, std::size_t);
  void (*widen_f16)(const uint16_t*, float*, std::size_t, float);
};

const Converters kPortable = {
    [](const float* s, uint16_t* d, std::size_t n) { narrow_bf16(s, d, n); },
    [](const uint16_t* s, float* d, std::size_t n) { widen_bf16(s, d, n); },
    [](const uint16_t* s, float* d, std::size_t n, float div) { widen_bf16_div(s, d, n, div); },
    [](const float* s, uint16_t* d, std::size_t n) { narrow_f16(s, d, n); },
    [](const uint16_t* s, float* d, std::size_t n, float div) { widen_f16(s, d, n, div); },
};

#if CHORUS_CONVERT_X86
// 16 values a step (half.hpp: round_bf16_lanes, packus, a lane permute);
// the scalar loop takes the tail. About 1.5x the compiler's vectorisation
// of narrow_bf16 in cache.
CHORUS_AVX2 void narrow_bf16_avx2(const float* s, uint16_t* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    store_bf16x16(d + i, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)),
                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 8)));
  narrow_bf16(s + i, d + i, n - i);
}
// Eight values a step (half.hpp: load_bf16x8), written out rather than left
// to the compiler, which at -O2 kept the scalar loop: widening was then the
// costliest step of a compressed call.
CHORUS_AVX2 void widen_bf16_avx2(const uint16_t* s, float* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, load_bf16x8(s + i));
  widen_bf16(s + i, d + i, n - i);
}
CHORUS_AVX2 void widen_bf16_div_avx2(const uint16_t* s, float* d, std::size_t n, float div) {
  std::size_t i = 0;
  const __m256 vdiv = _mm256_set1_ps(div);
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_div_ps(load_bf16x8(s + i), vdiv));
  widen_bf16_div(s + i, d + i, n - i, div);
}
// F16C: 8 lanes at a time, round to nearest even by the immediate (not
// MXCSR), as float_to_half_impl; the scalar tail is the portable conversion.
CHORUS_AVX2 void narrow_f16_f16c(const float* s, uint16_t* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  narrow_f16(s + i, d + i, n - i);
}
CHORUS_AVX2 void widen_f16_f16c(const uint16_t* s, float* d, std::size_t n, float div) {
  std::size_t i = 0;
  const __m256 vdiv = _mm256_set1_ps(div);
  for (; i + 8 <= n; i += 8) {
    const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_ps(d + i, _mm256_div_ps(f, vdiv));
  }
  widen_f16(s + i, d + i, n - i, div);
}

const Converters kAvx2 = {narrow_bf16_avx2, widen_bf16_avx2, widen_bf16_div_avx2, narrow_f16_f16c,
                          widen_f16_f16c};
#endif

const Converters& converters() {
#if CHORUS_CONVERT_X86
  static const Converters* best = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") ? &kAvx2 : &kPortable;
  }();
  return *best;
#else
  return kPortable;
#endif
}

[[noreturn]] void not_16_bit(DataType dtype, const char* what) {
  throw UsageError(fmt::format("{}: {} is not bfloat16 or float16", what, dtype_name(dtype)));
}

}  // namespace

void narrow_from_f32(const float* src, void* dst, std::size_t count, DataType to) {
  auto* d = static_cast<uint16_t*>(dst);
  if (to == DataType::bf16) return converters().narrow_bf16(src, d, count);
  if (to == DataType::f16) return converters().narrow_f16(src, d, count);
  not_16_bit(to, "narrow_from_f32");
}

void widen_to_f32(const void* src, float* dst, std::size_t count, DataType from, int divide_by) {
  if (divide_by <= 0) throw UsageError(fmt::format("widen_to_f32: divide by {}", divide_by));
  const auto* s = static_cast<const uint16_t*>(src);
  const auto div = static_cast<float>(divide_by);  // exact below 2^24
  if (from == DataType::bf16) {
    if (divide_by == 1) return converters().widen_bf16(s, dst, count);
    return converters().widen_bf16_div(s, dst, count, div);
  }
  if (from == DataType::f16) return converters().widen_f16(s, dst, count, div);
  not_16_bit(from, "widen_to_f32");
}

}  // namespace chorus
