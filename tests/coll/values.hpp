// Test data for every dtype: values unique per rank and element, chosen so
// that the reduction is exact whatever order the ranks are combined in, and an
// independent reference (double arithmetic for floats, wrap-around unsigned
// arithmetic for integers) that does not use the library's kernels.
//   floats, sum/avg/min/max: integers in [-mag, mag] with n * mag within the
//     dtype's exact-integer limit for n <= kMaxRanks (bf16: 256, f16: 2048,
//     f32: 2^24). At every element the ranks' values differ (a rank's offset
//     is 11 r modulo 2 mag + 1, which 11 does not divide), so a contribution
//     dropped, doubled or taken from the wrong rank changes the result.
//   floats, prod: values in {2, -2, 1/2, -1/2}; products are powers of two
//     within 2^-8..2^8 (exact in every dtype), and no factor is 1.
//   integers: any values, distinct across ranks at every element; sum wraps
//     exactly like the dtype does; prod uses
//     odd factors 3..11 with either sign, units modulo 2^bits, so products
//     never collapse to 0 and every factor changes the product.
//   avg: the exact sum, rounded to the dtype, divided by n in the dtype's
//     arithmetic (integers truncate); floats are compared to within 2 ulp.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "base/core/dtype.hpp"

namespace chorus::test {

// The largest rank count the data below keeps exact (and distinct per rank).
inline constexpr int kMaxRanks = 8;

template <typename Storage, DataType D>
struct FloatTraits {
  using T = Storage;
  static constexpr DataType dt = D;
  static constexpr bool fp = true;
  static double mag() {
    switch (D) {
      case DataType::f64:
        return 1099511627776.0;  // 2^40
      case DataType::f32:
        return 1048576.0;  // 2^20
      case DataType::f16:
        return 128.0;
      default:
        return 32.0;  // bf16: 8 ranks x 32 = 256, its last exact integer
    }
  }
  static double eps() {
    switch (D) {
      case DataType::f64:
        return 0x1p-52;
      case DataType::f32:
        return 0x1p-23;
      case DataType::f16:
        return 0x1p-10;
      default:
        return 0x1p-7;
    }
  }
  static T from(double v) {
    if constexpr (D == DataType::f16)
      return float_to_half(static_cast<float>(v));
    else if constexpr (D == DataType::bf16)
      return float_to_bf16(static_cast<float>(v));
    else
      return static_cast<T>(v);
  }
  static double to(T x) {
    if constexpr (D == DataType::f16)
      return half_to_float(x);
    else if constexpr (D == DataType::bf16)
      return bf16_to_float(x);
    else
      return static_cast<double>(x);
  }
  // x / n in the dtype's arithmetic (f16/bf16 through float).
  static T divide(T x, int n) {
    if constexpr (D == DataType::f64)
      return x / n;
    else if constexpr (D == DataType::f32)
      return x / static_cast<float>(n);
    else
      return from(static_cast<float>(to(x)) / static_cast<float>(n));
  }
};

template <typename I, DataType D>
struct IntTraits {
  using T = I;
  using U = std::make_unsigned_t<I>;
  static constexpr DataType dt = D;
  static constexpr bool fp = false;
  static double to(T x) { return static_cast<double>(x); }
};

using F32 = FloatTraits<float, DataType::f32>;
using F64 = FloatTraits<double, DataType::f64>;
using F16 = FloatTraits<uint16_t, DataType::f16>;
using BF16 = FloatTraits<uint16_t, DataType::bf16>;

// Calls f(Traits{}) for the traits of dtype.
template <typename F>
decltype(auto) with_dtype(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::f32:
      return f(F32{});
    case DataType::f64:
      return f(F64{});
    case DataType::f16:
      return f(F16{});
    case DataType::bf16:
      return f(BF16{});
    case DataType::i8:
      return f(IntTraits<int8_t, DataType::i8>{});
    case DataType::u8:
      return f(IntTraits<uint8_t, DataType::u8>{});
    case DataType::i32:
      return f(IntTraits<int32_t, DataType::i32>{});
    case DataType::u32:
      return f(IntTraits<uint32_t, DataType::u32>{});
    case DataType::i64:
      return f(IntTraits<int64_t, DataType::i64>{});
    case DataType::u64:
      return f(IntTraits<uint64_t, DataType::u64>{});
  }
  return f(F32{});
}

// A well-mixed 64-bit value per (rank, element): splitmix64's finalizer, so
// that every bit differs between neighbouring ranks and elements.
inline uint64_t mix(int rank, std::size_t i) {
  uint64_t z = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull +
               static_cast<uint64_t>(rank + 1) * 0xD1B54A32D192ED03ull + 12345;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The value rank `rank` contributes at element i.
template <typename Tr>
typename Tr::T gen(int rank, std::size_t i, ReduceOp op) {
  using T = typename Tr::T;
  const uint64_t h = mix(rank, i);
  if constexpr (Tr::fp) {
    if (op == ReduceOp::prod) {
      static constexpr double pick[4] = {2.0, -2.0, 0.5, -0.5};
      return Tr::from(pick[(h >> 29) % 4]);
    }
    const auto span = static_cast<uint64_t>(2 * Tr::mag() + 1);
    // The element's base (no period in i) plus the rank's offset.
    const uint64_t k = (mix(-1, i) % span + static_cast<uint64_t>(rank) * 11) % span;
    return Tr::from(static_cast<double>(k) - Tr::mag());
  } else {
    using U = typename Tr::U;
    if (op == ReduceOp::prod) {  // odd factors: units, so products never collapse to 0
      const U v = static_cast<U>(2 * ((h >> 33) % 5) + 3);
      return static_cast<T>(std::is_signed_v<T> && ((h >> 40) & 1) ? static_cast<U>(0) - v : v);
    }
    // The element's base plus an odd multiple of the rank: distinct across
    // ranks modulo 2^bits, in an order that varies per element.
    return static_cast<T>(
        static_cast<U>((mix(-1, i) >> 7) + static_cast<uint64_t>(rank) * 0x9E3779B97F4A7C15ull));
  }
}

// The reduction over ranks 0..n-1 of gen(r, i, op).
template <typename Tr>
typename Tr::T reference(int n, std::size_t i, ReduceOp op) {
  using T = typename Tr::T;
  if constexpr (Tr::fp) {
    double acc = Tr::to(gen<Tr>(0, i, op));
    for (int r = 1; r < n; ++r) {
      const double v = Tr::to(gen<Tr>(r, i, op));
      switch (op) {
        case ReduceOp::sum:
        case ReduceOp::avg:
          acc += v;
          break;
        case ReduceOp::prod:
          acc *= v;
          break;
        case ReduceOp::min:
          acc = std::min(acc, v);
          break;
        case ReduceOp::max:
          acc = std::max(acc, v);
          break;
      }
    }
    const T x = Tr::from(acc);
    return op == ReduceOp::avg ? Tr::divide(x, n) : x;
  } else {
    using U = typename Tr::U;
    U acc = static_cast<U>(gen<Tr>(0, i, op));
    T best = gen<Tr>(0, i, op);
    for (int r = 1; r < n; ++r) {
      const T v = gen<Tr>(r, i, op);
      switch (op) {
        case ReduceOp::sum:
        case ReduceOp::avg:
          acc = static_cast<U>(acc + static_cast<U>(v));
          break;
        case ReduceOp::prod:
          acc = static_cast<U>(acc * static_cast<U>(v));
          break;
        case ReduceOp::min:
          best = std::min(best, v);
          break;
        case ReduceOp::max:
          best = std::max(best, v);
          break;
      }
    }
    if (op == ReduceOp::min || op == ReduceOp::max) return best;
    const T x = static_cast<T>(acc);
    return op == ReduceOp::avg ? static_cast<T>(x / static_cast<T>(n)) : x;
  }
}

template <typename Tr>
bool same(typename Tr::T got, typename Tr::T want, ReduceOp op) {
  if constexpr (Tr::fp) {
    const double g = Tr::to(got), w = Tr::to(want);
    if (op == ReduceOp::avg) return std::fabs(g - w) <= 2 * Tr::eps() * std::fabs(w);
    return g == w;
  } else {
    return got == want;
  }
}

}  // namespace chorus::test
