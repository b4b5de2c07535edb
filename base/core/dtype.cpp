// Data types, reduce kernels and the f16/bf16 conversions. See docs/kernels.md.
//
// Every kernel is one templated loop over an element functor (Sum, Prod, Min,
// Max) and a storage type. Three paths per kernel, chosen by pointer equality,
// let the loops use __restrict without undefined behaviour when dst aliases an
// input exactly (the only aliasing the contract allows):
//   dst == a:  d[i] = op(d[i], b[i])   d and b do not overlap
//   dst == b:  d[i] = op(a[i], d[i])   d and a do not overlap
//   else:      d[i] = op(a[i], b[i])   d overlaps neither (a == b is fine: both are read-only)
// Argument order is kept in every path, so results never depend on the path.
//
// On x86-64 each kernel is compiled twice, for the baseline ISA (SSE2) and for
// AVX2+F16C; reduce_fn() picks the second when the CPU supports it. Both give
// bit-identical results (integer ops are exact, float ops are single IEEE
// operations, and the F16C conversions round to nearest even like the portable
// ones; only NaN payloads may differ, NaN stays NaN).
#include "base/core/dtype.hpp"

#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "base/core/error.hpp"
#include "base/core/half.hpp"
#include "base/core/text.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#define CHORUS_X86_DISPATCH 1
#include <immintrin.h>
#else
#define CHORUS_X86_DISPATCH 0
#endif

namespace chorus {
namespace {

using namespace half_impl;

// ---- element operations ----

// Integers compute in the unsigned type of the same width, so that sum and prod
// wrap around (two's complement) without undefined behaviour.
template <class T>
struct ArithOf {
  using type = T;
};
template <class T>
requires std::is_integral_v<T>
struct ArithOf<T> {
  using type = std::make_unsigned_t<T>;
};
template <class T>
using Arith = typename ArithOf<T>::type;

struct Sum {
  template <class T>
  CHORUS_INLINE static T apply(T x, T y) {
    using U = Arith<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  }
};
struct Prod {
  template <class T>
  CHORUS_INLINE static T apply(T x, T y) {
    using U = Arith<T>;
    // u8/i8 promote to int: 255 * 255 fits, and the result wraps on the way back.
    return static_cast<T>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)));
  }
};
// Floats: NaN propagates (either input NaN -> NaN); otherwise the smaller/larger
// by plain comparison. min(-0, +0) and max(-0, +0) return the second argument
// (the two compare equal).
struct Min {
  template <class T>
  CHORUS_INLINE static T apply(T x, T y) {
    if constexpr (std::is_floating_point_v<T>)
      return (x < y || x != x) ? x : y;
    else
      return x < y ? x : y;
  }
};
struct Max {
  template <class T>
  CHORUS_INLINE static T apply(T x, T y) {
    if constexpr (std::is_floating_point_v<T>)
      return (x > y || x != x) ? x : y;
    else
      return x > y ? x : y;
  }
};

// Storage types for the 16-bit floats: distinct tags over uint16_t.
struct F16 {};
struct BF16 {};

template <class Tag>
struct Storage {
  using type = Tag;
};
template <>
struct Storage<F16> {
  using type = uint16_t;
};
template <>
struct Storage<BF16> {
  using type = uint16_t;
};

template <class Op, class Tag>
CHORUS_INLINE typename Storage<Tag>::type elem(typename Storage<Tag>::type x,
                                               typename Storage<Tag>::type y) {
  if constexpr (std::is_same_v<Tag, F16>)
    return float_to_half_impl(Op::apply(half_to_float_impl(x), half_to_float_impl(y)));
  else if constexpr (std::is_same_v<Tag, BF16>)
    return float_to_bf16_impl(Op::apply(bf16_to_float_impl(x), bf16_to_float_impl(y)));
  else
    return Op::apply(x, y);
}

template <class Op, class Tag>
CHORUS_INLINE void loop_into_a(typename Storage<Tag>::type* __restrict d,
                               const typename Storage<Tag>::type* __restrict b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = elem<Op, Tag>(d[i], b[i]);
}
template <class Op, class Tag>
CHORUS_INLINE void loop_into_b(typename Storage<Tag>::type* __restrict d,
                               const typename Storage<Tag>::type* __restrict a, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = elem<Op, Tag>(a[i], d[i]);
}
template <class Op, class Tag>
CHORUS_INLINE void loop3(typename Storage<Tag>::type* __restrict d,
                         const typename Storage<Tag>::type* __restrict a,
                         const typename Storage<Tag>::type* __restrict b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = elem<Op, Tag>(a[i], b[i]);
}

template <class Op, class Tag>
CHORUS_INLINE void kernel_body(void* dst, const void* a, const void* b, std::size_t n) {
  using T = typename Storage<Tag>::type;
  auto* d = static_cast<T*>(dst);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  if (d == x)
    loop_into_a<Op, Tag>(d, y, n);
  else if (d == y)
    loop_into_b<Op, Tag>(d, x, n);
  else
    loop3<Op, Tag>(d, x, y, n);
}

template <class Op, class Tag>
void kernel_portable(void* dst, const void* a, const void* b, std::size_t n) {
  kernel_body<Op, Tag>(dst, a, b, n);
}

#if CHORUS_X86_DISPATCH

// f16 with F16C: 8 lanes at a time, hardware conversions (round to nearest even
// by the immediate, independent of MXCSR), scalar portable tail.
template <class Op>
CHORUS_AVX2 CHORUS_INLINE __m256 op8(__m256 x, __m256 y) {
  if constexpr (std::is_same_v<Op, Sum>) {
    return _mm256_add_ps(x, y);
  } else if constexpr (std::is_same_v<Op, Prod>) {
    return _mm256_mul_ps(x, y);
  } else {
    // (x OP y || x unordered) ? x : y, as in Min/Max above.
    const __m256 pick_x = _mm256_or_ps(
        std::is_same_v<Op, Min> ? _mm256_cmp_ps(x, y, _CMP_LT_OQ) : _mm256_cmp_ps(x, y, _CMP_GT_OQ),
        _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    return _mm256_blendv_ps(y, x, pick_x);
  }
}

template <class Op>
CHORUS_AVX2 void kernel_f16_f16c(void* dst, const void* a, const void* b, std::size_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  auto* x = static_cast<const uint16_t*>(a);
  auto* y = static_cast<const uint16_t*>(b);
  std::size_t i = 0;
  // Each step loads both inputs before storing, so exact aliasing is fine.
  for (; i + 8 <= n; i += 8) {
    const __m256 fx = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 fy = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(op8<Op>(fx, fy), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) d[i] = elem<Op, F16>(x[i], y[i]);
}

// bf16: 16 lanes at a time, widened by a shift, reduced in float32,
// rounded as float_to_bf16_impl (half.hpp), scalar portable tail.
template <class Op>
CHORUS_AVX2 void kernel_bf16_avx2(void* dst, const void* a, const void* b, std::size_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  auto* x = static_cast<const uint16_t*>(a);
  auto* y = static_cast<const uint16_t*>(b);
  std::size_t i = 0;
  // Each step loads both inputs before storing, so exact aliasing is fine.
  for (; i + 16 <= n; i += 16) {
    const __m256 lo = op8<Op>(load_bf16x8(x + i), load_bf16x8(y + i));
    const __m256 hi = op8<Op>(load_bf16x8(x + i + 8), load_bf16x8(y + i + 8));
    store_bf16x16(d + i, _mm256_castps_si256(lo), _mm256_castps_si256(hi));
  }
  for (; i < n; ++i) d[i] = elem<Op, BF16>(x[i], y[i]);
}

template <class Op, class Tag>
CHORUS_AVX2 void kernel_avx2(void* dst, const void* a, const void* b, std::size_t n) {
  if constexpr (std::is_same_v<Tag, F16>)
    kernel_f16_f16c<Op>(dst, a, b, n);
  else if constexpr (std::is_same_v<Tag, BF16>)
    kernel_bf16_avx2<Op>(dst, a, b, n);
  else
    kernel_body<Op, Tag>(dst, a, b, n);
}
#endif

// ---- tables ----

struct KernelTable {
  ReduceFn fn[kDataTypeCount][kReduceOpCount] = {};
};

template <template <class, class> class K, class Tag>
void fill_row(KernelTable& t, DataType dtype) {
  auto row = t.fn[static_cast<int>(dtype)];
  row[static_cast<int>(ReduceOp::sum)] = &K<Sum, Tag>::run;
  row[static_cast<int>(ReduceOp::prod)] = &K<Prod, Tag>::run;
  row[static_cast<int>(ReduceOp::min)] = &K<Min, Tag>::run;
  row[static_cast<int>(ReduceOp::max)] = &K<Max, Tag>::run;
  row[static_cast<int>(ReduceOp::avg)] = &K<Sum, Tag>::run;
}

template <class Op, class Tag>
struct Portable {
  static void run(void* d, const void* a, const void* b, std::size_t n) {
    kernel_portable<Op, Tag>(d, a, b, n);
  }
};
#if CHORUS_X86_DISPATCH
template <class Op, class Tag>
struct Avx2 {
  static void run(void* d, const void* a, const void* b, std::size_t n) {
    kernel_avx2<Op, Tag>(d, a, b, n);
  }
};
#endif

template <template <class, class> class K>
KernelTable make_table() {
  KernelTable t;
  fill_row<K, float>(t, DataType::f32);
  fill_row<K, double>(t, DataType::f64);
  fill_row<K, F16>(t, DataType::f16);
  fill_row<K, BF16>(t, DataType::bf16);
  fill_row<K, int8_t>(t, DataType::i8);
  fill_row<K, uint8_t>(t, DataType::u8);
  fill_row<K, int32_t>(t, DataType::i32);
  fill_row<K, uint32_t>(t, DataType::u32);
  fill_row<K, int64_t>(t, DataType::i64);
  fill_row<K, uint64_t>(t, DataType::u64);
  return t;
}

bool cpu_has_avx2() {
#if CHORUS_X86_DISPATCH
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

const KernelTable& portable_table() {
  static const KernelTable t = make_table<Portable>();
  return t;
}

const KernelTable& best_table() {
#if CHORUS_X86_DISPATCH
  static const KernelTable t = cpu_has_avx2() ? make_table<Avx2>() : make_table<Portable>();
  return t;
#else
  return portable_table();
#endif
}

void check_dtype(DataType dtype) {
  if (!valid_dtype(static_cast<int>(dtype))) throw_unknown_dtype(dtype);
}
void check_op(ReduceOp op) {
  if (!valid_op(static_cast<int>(op)))
    throw UsageError(CHORUS_ERR_INVALID_ARGUMENT,
                     fmt::format("unknown reduction op {}", static_cast<int>(op)));
}

// Integer average: both operands fit in a 64-bit type of T's signedness (n may
// not fit in T itself: 200 / 1000 in uint8). C++ division truncates toward zero.
template <class T>
void scale_int(void* data, std::size_t count, int n) {
  auto* p = static_cast<T*>(data);
  using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  const auto div = static_cast<Wide>(n);
  for (std::size_t i = 0; i < count; ++i) p[i] = static_cast<T>(static_cast<Wide>(p[i]) / div);
}

template <class T>
void scale_float(void* data, std::size_t count, int n) {
  auto* p = static_cast<T*>(data);
  const T div = static_cast<T>(n);  // exact for |n| < 2^24
  for (std::size_t i = 0; i < count; ++i) p[i] = p[i] / div;
}

}  // namespace

void throw_unknown_dtype(DataType dtype) {
  throw UsageError(CHORUS_ERR_INVALID_ARGUMENT,
                   fmt::format("unknown data type {}", static_cast<int>(dtype)));
}

std::string_view dtype_name(DataType dtype) {
  switch (dtype) {
    case DataType::f32:
      return "float32";
    case DataType::f64:
      return "float64";
    case DataType::f16:
      return "float16";
    case DataType::bf16:
      return "bfloat16";
    case DataType::i8:
      return "int8";
    case DataType::u8:
      return "uint8";
    case DataType::i32:
      return "int32";
    case DataType::u32:
      return "uint32";
    case DataType::i64:
      return "int64";
    case DataType::u64:
      return "uint64";
  }
  check_dtype(dtype);
  return {};
}

std::string_view op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::prod:
      return "prod";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
    case ReduceOp::avg:
      return "avg";
  }
  check_op(op);
  return {};
}

DataType parse_dtype(std::string_view name) {
  static constexpr struct {
    const char* name;
    DataType dtype;
  } kNames[] = {
      {"float32", DataType::f32},   {"f32", DataType::f32},     {"float", DataType::f32},
      {"fp32", DataType::f32},      {"float64", DataType::f64}, {"f64", DataType::f64},
      {"double", DataType::f64},    {"fp64", DataType::f64},    {"float16", DataType::f16},
      {"f16", DataType::f16},       {"half", DataType::f16},    {"fp16", DataType::f16},
      {"bfloat16", DataType::bf16}, {"bf16", DataType::bf16},   {"int8", DataType::i8},
      {"i8", DataType::i8},         {"uint8", DataType::u8},    {"u8", DataType::u8},
      {"int32", DataType::i32},     {"i32", DataType::i32},     {"int", DataType::i32},
      {"uint32", DataType::u32},    {"u32", DataType::u32},     {"int64", DataType::i64},
      {"i64", DataType::i64},       {"uint64", DataType::u64},  {"u64", DataType::u64},
  };
  const std::string l = ascii_lower(name);
  for (const auto& e : kNames)
    if (l == e.name) return e.dtype;
  throw UsageError(fmt::format(
      "unknown data type '{}' (float32, float64, float16, bfloat16, int8, uint8, int32, uint32, "
      "int64, uint64)",
      name));
}

ReduceOp parse_op(std::string_view name) {
  const std::string l = ascii_lower(name);
  for (int i = 0; i < kReduceOpCount; ++i)
    if (l == op_name(static_cast<ReduceOp>(i))) return static_cast<ReduceOp>(i);
  throw UsageError(fmt::format("unknown reduction op '{}' (sum, prod, min, max, avg)", name));
}

ReduceFn reduce_fn(DataType dtype, ReduceOp op) {
  check_dtype(dtype);
  check_op(op);
  return best_table().fn[static_cast<int>(dtype)][static_cast<int>(op)];
}

ReduceFn reduce_fn_portable(DataType dtype, ReduceOp op) {
  check_dtype(dtype);
  check_op(op);
  return portable_table().fn[static_cast<int>(dtype)][static_cast<int>(op)];
}

std::string_view reduce_isa() {
#if CHORUS_X86_DISPATCH
  static const bool avx2 = cpu_has_avx2();
  return avx2 ? "avx2" : "default";
#else
  return "default";
#endif
}

void scale_for_avg(void* data, std::size_t count, DataType dtype, int n) {
  check_dtype(dtype);
  if (n <= 0) throw UsageError(fmt::format("average over {} ranks", n));
  if (count == 0 || n == 1) return;
  switch (dtype) {
    case DataType::f32:
      return scale_float<float>(data, count, n);
    case DataType::f64:
      return scale_float<double>(data, count, n);
    case DataType::f16: {
      auto* p = static_cast<uint16_t*>(data);
      const float div = static_cast<float>(n);
      for (std::size_t i = 0; i < count; ++i)
        p[i] = float_to_half_impl(half_to_float_impl(p[i]) / div);
      return;
    }
    case DataType::bf16: {
      auto* p = static_cast<uint16_t*>(data);
      const float div = static_cast<float>(n);
      for (std::size_t i = 0; i < count; ++i)
        p[i] = float_to_bf16_impl(bf16_to_float_impl(p[i]) / div);
      return;
    }
    case DataType::i8:
      return scale_int<int8_t>(data, count, n);
    case DataType::u8:
      return scale_int<uint8_t>(data, count, n);
    case DataType::i32:
      return scale_int<int32_t>(data, count, n);
    case DataType::u32:
      return scale_int<uint32_t>(data, count, n);
    case DataType::i64:
      return scale_int<int64_t>(data, count, n);
    case DataType::u64:
      return scale_int<uint64_t>(data, count, n);
  }
}

float half_to_float(uint16_t h) {
  return half_to_float_impl(h);
}
uint16_t float_to_half(float f) {
  return float_to_half_impl(f);
}
float bf16_to_float(uint16_t b) {
  return bf16_to_float_impl(b);
}
uint16_t float_to_bf16(float f) {
  return float_to_bf16_impl(f);
}

}  // namespace chorus
