// The reduce kernels (the chosen ISA's and the portable ones) against an
// independent reference, every dtype and op, every aliasing of output and
// inputs, lengths around the vector loops' edges and three offsets; and
// scale_for_avg. Why the references are exact: test_dtype.cpp.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "base/core/dtype.hpp"
#include "base/core/error.hpp"
#include "tests/unit/ref_float16.hpp"

using namespace chorus;
using namespace chorus::test;

namespace {

// ---------------------------------------------------------------------------
// Per-dtype traits for the kernel sweep.

struct F16Tag {};
struct BF16Tag {};

template <class Tag>
struct Traits;

template <class T>
struct IntTraits {
  using S = T;
  static S gen(std::mt19937_64& rng, bool) { return static_cast<S>(rng()); }
  static S ref(ReduceOp op, S a, S b) {
    // Exact arithmetic modulo 2^64, then the (modular, C++20) conversion to T.
    const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        return static_cast<S>(ua + ub);
      case ReduceOp::prod:
        return static_cast<S>(ua * ub);
      case ReduceOp::min:
        return std::min(a, b);
      case ReduceOp::max:
        return std::max(a, b);
    }
    return 0;
  }
  static bool same(S got, S want) { return got == want; }
  static std::string show(S v) { return std::to_string(static_cast<int64_t>(v)); }
  static S scale_ref(S v, int n) {
    if constexpr (std::is_signed_v<S>) {
      // Truncation toward zero, spelled out.
      const int64_t x = v;
      const int64_t q = (x < 0 ? -((-x) / n) : x / n);
      return static_cast<S>(q);
    } else {
      return static_cast<S>(v / static_cast<uint64_t>(n));
    }
  }
};
template <>
struct Traits<int8_t> : IntTraits<int8_t> {};
template <>
struct Traits<uint8_t> : IntTraits<uint8_t> {};
template <>
struct Traits<int32_t> : IntTraits<int32_t> {};
template <>
struct Traits<uint32_t> : IntTraits<uint32_t> {};
template <>
struct Traits<int64_t> : IntTraits<int64_t> {};
template <>
struct Traits<uint64_t> : IntTraits<uint64_t> {};

// Float min/max as documented: NaN if either is NaN, else the smaller/larger;
// when they compare equal (e.g. -0 and +0), the second argument.
template <class D>
D ref_minmax(ReduceOp op, D a, D b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return b;
  return op == ReduceOp::min ? std::min(a, b) : std::max(a, b);
}

double ref_exact(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return a + b;
    case ReduceOp::prod:
      return a * b;
    case ReduceOp::min:
    case ReduceOp::max:
      return ref_minmax(op, a, b);
  }
  return 0;
}

// Random bit patterns: sign, exponent field in [elo, ehi], random mantissa.
// "wide" covers zero/subnormals through inf/NaN; "narrow" keeps exponents
// close so that sums interact and round.
template <class U>
U gen_bits(std::mt19937_64& rng, int mbits, int ebits, bool wide, int narrow_lo, int narrow_hi) {
  const int emax_field = (1 << ebits) - 1;
  std::uniform_int_distribution<int> edist(wide ? 0 : narrow_lo, wide ? emax_field : narrow_hi);
  const uint64_t r = rng();
  const uint64_t man = r & ((uint64_t{1} << mbits) - 1);
  const uint64_t sign = (r >> 63) & 1;
  const auto e = static_cast<uint64_t>(edist(rng));
  return static_cast<U>((sign << (mbits + ebits)) | (e << mbits) | man);
}

template <>
struct Traits<float> {
  using S = float;
  static S gen(std::mt19937_64& rng, bool wide) {
    return bits_of<float>(gen_bits<uint32_t>(rng, 23, 8, wide, 120, 134));
  }
  static S ref(ReduceOp op, S a, S b) {
    if (op == ReduceOp::min || op == ReduceOp::max) return ref_minmax(op, a, b);
    return static_cast<float>(ref_exact(op, a, b));
  }
  static bool same(S got, S want) {
    if (std::isnan(want)) return std::isnan(got);
    return bits_of<uint32_t>(got) == bits_of<uint32_t>(want);
  }
  static std::string show(S v) { return fmt::format("{} ({:#010x})", v, bits_of<uint32_t>(v)); }
  static S scale_ref(S v, int n) { return static_cast<float>(static_cast<double>(v) / n); }
};

template <>
struct Traits<double> {
  using S = double;
  static S gen(std::mt19937_64& rng, bool wide) {
    return bits_of<double>(gen_bits<uint64_t>(rng, 52, 11, wide, 1015, 1031));
  }
  // No wider exact type: plain double arithmetic, which is what IEEE specifies.
  static S ref(ReduceOp op, S a, S b) { return ref_exact(op, a, b); }
  static bool same(S got, S want) {
    if (std::isnan(want)) return std::isnan(got);
    return bits_of<uint64_t>(got) == bits_of<uint64_t>(want);
  }
  static std::string show(S v) { return fmt::format("{} ({:#018x})", v, bits_of<uint64_t>(v)); }
  static S scale_ref(S v, int n) { return v / n; }
};

template <Format F, int NarrowLo, int NarrowHi>
struct Small16Traits {
  using S = uint16_t;
  static S gen(std::mt19937_64& rng, bool wide) {
    return gen_bits<uint16_t>(rng, F.mbits(), F.ebits, wide, NarrowLo, NarrowHi);
  }
  static S ref(ReduceOp op, S a, S b) {
    if ((op == ReduceOp::min || op == ReduceOp::max) && !F.is_nan(a) && !F.is_nan(b)) {
      const double x = ref_decode(a, F), y = ref_decode(b, F);
      if (x == y) return b;
      return (op == ReduceOp::min ? x < y : x > y) ? a : b;
    }
    return ref_encode(ref_exact(op, ref_decode(a, F), ref_decode(b, F)), F);
  }
  static bool same(S got, S want) {
    if (F.is_nan(want)) return F.is_nan(got);
    return got == want;
  }
  static std::string show(S v) { return fmt::format("{} ({:#06x})", ref_decode(v, F), v); }
  static S scale_ref(S v, int n) { return ref_encode(ref_decode(v, F) / n, F); }
};
template <>
struct Traits<F16Tag> : Small16Traits<kHalf, 13, 17> {};
template <>
struct Traits<BF16Tag> : Small16Traits<kBf16, 120, 134> {};

constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                             ReduceOp::avg};

enum class Alias { none, dst_is_a, dst_is_b, a_is_b, all_same };
const char* alias_name(Alias m) {
  switch (m) {
    case Alias::none:
      return "dst,a,b distinct";
    case Alias::dst_is_a:
      return "dst==a";
    case Alias::dst_is_b:
      return "dst==b";
    case Alias::a_is_b:
      return "a==b";
    case Alias::all_same:
      return "dst==a==b";
  }
  return "?";
}

// Runs fn over one case; returns a description of the first wrong element or
// of a write outside [0, n), or "" when all is right.
template <class Tag>
std::string run_case(ReduceFn fn, ReduceOp op, std::size_t n, std::size_t off, Alias mode,
                     bool wide, std::mt19937_64& rng) {
  using Tr = Traits<Tag>;
  using S = typename Tr::S;
  const std::size_t guard = 3;
  const std::size_t total = off + n + guard;
  std::vector<S> A(total), B(total), D(total);
  for (auto& v : A) v = Tr::gen(rng, wide);
  for (auto& v : B) v = Tr::gen(rng, wide);
  for (auto& v : D) v = Tr::gen(rng, wide);
  // A few special values, when there is room.
  if constexpr (std::is_same_v<S, float> || std::is_same_v<S, double>) {
    const S specials[] = {std::numeric_limits<S>::quiet_NaN(), std::numeric_limits<S>::infinity(),
                          -std::numeric_limits<S>::infinity(), S(0), -S(0)};
    for (std::size_t k = 0; k < std::size(specials) && 2 * k + 1 < n; ++k) {
      A[off + 2 * k + 1] = specials[k];
      B[off + n - 1 - 2 * k] = specials[std::size(specials) - 1 - k];
    }
    // Pairs that compare equal but differ in bits, in both orders (min/max pick
    // the second argument, in every aliasing mode).
    if (n >= 4) {
      A[off + n / 2] = -S(0), B[off + n / 2] = S(0);
      A[off + n / 4] = S(0), B[off + n / 4] = -S(0);
    }
  } else if constexpr (std::is_same_v<Tag, F16Tag> || std::is_same_v<Tag, BF16Tag>) {
    if (n >= 4) {
      A[off + n / 2] = 0x8000, B[off + n / 2] = 0x0000;
      A[off + n / 4] = 0x0000, B[off + n / 4] = 0x8000;
    }
  }
  S* a = A.data() + off;
  S* b = B.data() + off;
  S* d = D.data() + off;
  const S* x = a;
  const S* y = b;
  S* out = d;
  std::vector<S>* out_buf = &D;
  switch (mode) {
    case Alias::none:
      break;
    case Alias::dst_is_a:
      out = a, out_buf = &A;
      break;
    case Alias::dst_is_b:
      out = b, out_buf = &B;
      break;
    case Alias::a_is_b:
      y = a;
      break;
    case Alias::all_same:
      y = a, out = a, out_buf = &A;
      break;
  }
  std::vector<S> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = Tr::ref(op, x[i], y[i]);
  const std::vector<S> before = *out_buf;

  fn(out, x, y, n);

  for (std::size_t i = 0; i < n; ++i)
    if (!Tr::same(out[i], want[i]))
      return fmt::format("element {}: {} op {} gave {}, want {}", i, Tr::show(before[off + i]),
                         Tr::show(y == out ? before[off + i] : y[i]), Tr::show(out[i]),
                         Tr::show(want[i]));
  for (std::size_t i = 0; i < total; ++i) {
    if (i >= off && i < off + n) continue;
    if (std::memcmp(&(*out_buf)[i], &before[i], sizeof(S)) != 0)
      return fmt::format("wrote outside the range at index {} (off {})", i, off);
  }
  return "";
}

template <class Tag>
void sweep(DataType dtype) {
  const std::size_t lengths[] = {0,  1,  2,  3,  7,  8,  9,   15,   16,
                                 17, 31, 32, 33, 63, 65, 100, 1000, 1031};
  const std::size_t offsets[] = {0, 1, 3};
  const Alias modes[] = {Alias::none, Alias::dst_is_a, Alias::dst_is_b, Alias::a_is_b,
                         Alias::all_same};
  std::mt19937_64 rng(0xC0FFEE + static_cast<int>(dtype));
  struct Variant {
    const char* name;
    ReduceFn (*get)(DataType, ReduceOp);
  };
  const Variant variants[] = {{"reduce_fn", &reduce_fn},
                              {"reduce_fn_portable", &reduce_fn_portable}};
  for (const auto& variant : variants)
    for (ReduceOp op : kOps) {
      ReduceFn fn = variant.get(dtype, op);
      REQUIRE(fn != nullptr);
      int failures = 0;
      for (bool wide : {true, false})
        for (std::size_t n : lengths)
          for (std::size_t off : offsets)
            for (Alias mode : modes) {
              const std::string err = run_case<Tag>(fn, op, n, off, mode, wide, rng);
              if (err.empty()) continue;
              if (++failures > 3) continue;  // report a few, not thousands
              INFO(variant.name << " (isa " << reduce_isa() << ") " << dtype_name(dtype) << " "
                                << op_name(op) << " n=" << n << " offset=" << off << " "
                                << alias_name(mode) << (wide ? " wide" : " narrow") << ": " << err);
              CHECK(err.empty());
            }
      INFO(variant.name << " " << dtype_name(dtype) << " " << op_name(op));
      CHECK(failures == 0);
    }
}

template <class Tag>
void check_scale(DataType dtype) {
  using Tr = Traits<Tag>;
  using S = typename Tr::S;
  std::mt19937_64 rng(42 + static_cast<int>(dtype));
  for (int n : {1, 2, 3, 4, 5, 7, 8, 16, 1000}) {
    for (bool wide : {true, false}) {
      std::vector<S> v(257);
      for (auto& e : v) e = Tr::gen(rng, wide);
      const std::vector<S> before = v;
      // Scale all but the first and last element; those must stay untouched.
      scale_for_avg(v.data() + 1, v.size() - 2, dtype, n);
      for (std::size_t i = 0; i < v.size(); ++i) {
        const bool inside = i >= 1 && i + 1 < v.size();
        const S want = inside ? (n == 1 ? before[i] : Tr::scale_ref(before[i], n)) : before[i];
        if (!Tr::same(v[i], want))
          FAIL(dtype_name(dtype) << " / " << n << " element " << i << ": " << Tr::show(before[i])
                                 << " gave " << Tr::show(v[i]) << " want " << Tr::show(want));
      }
    }
  }
}

}  // namespace

TEST_CASE("kernels match the reference: float32", "[kernel]") {
  sweep<float>(DataType::f32);
}
TEST_CASE("kernels match the reference: float64", "[kernel]") {
  sweep<double>(DataType::f64);
}
TEST_CASE("kernels match the reference: float16", "[kernel]") {
  sweep<F16Tag>(DataType::f16);
}
TEST_CASE("kernels match the reference: bfloat16", "[kernel]") {
  sweep<BF16Tag>(DataType::bf16);
}
TEST_CASE("kernels match the reference: int8", "[kernel]") {
  sweep<int8_t>(DataType::i8);
}
TEST_CASE("kernels match the reference: uint8", "[kernel]") {
  sweep<uint8_t>(DataType::u8);
}
TEST_CASE("kernels match the reference: int32", "[kernel]") {
  sweep<int32_t>(DataType::i32);
}
TEST_CASE("kernels match the reference: uint32", "[kernel]") {
  sweep<uint32_t>(DataType::u32);
}
TEST_CASE("kernels match the reference: int64", "[kernel]") {
  sweep<int64_t>(DataType::i64);
}
TEST_CASE("kernels match the reference: uint64", "[kernel]") {
  sweep<uint64_t>(DataType::u64);
}

TEST_CASE("scale_for_avg", "[dtype][avg]") {
  {
    int32_t v[] = {-7, 7, -8, 9, std::numeric_limits<int32_t>::min(), 1, -1};
    scale_for_avg(v, 7, DataType::i32, 2);
    CHECK(v[0] == -3);
    CHECK(v[1] == 3);
    CHECK(v[2] == -4);
    CHECK(v[3] == 4);
    CHECK(v[4] == std::numeric_limits<int32_t>::min() / 2);
    CHECK(v[5] == 0);
    CHECK(v[6] == 0);
    int8_t w[] = {-128, 127, -5};
    scale_for_avg(w, 3, DataType::i8, 3);
    CHECK(w[0] == -42);
    CHECK(w[1] == 42);
    CHECK(w[2] == -1);
    uint64_t u[] = {~uint64_t{0}};
    scale_for_avg(u, 1, DataType::u64, 3);
    CHECK(u[0] == ~uint64_t{0} / 3);
    int64_t l[] = {std::numeric_limits<int64_t>::min()};
    scale_for_avg(l, 1, DataType::i64, 7);
    CHECK(l[0] == std::numeric_limits<int64_t>::min() / 7);
  }
  check_scale<float>(DataType::f32);
  check_scale<double>(DataType::f64);
  check_scale<F16Tag>(DataType::f16);
  check_scale<BF16Tag>(DataType::bf16);
  check_scale<int8_t>(DataType::i8);
  check_scale<uint8_t>(DataType::u8);
  check_scale<int32_t>(DataType::i32);
  check_scale<uint32_t>(DataType::u32);
  check_scale<int64_t>(DataType::i64);
  check_scale<uint64_t>(DataType::u64);
  float f[] = {1.0f};
  CHECK_THROWS_AS(scale_for_avg(f, 1, DataType::f32, 0), UsageError);
  CHECK_THROWS_AS(scale_for_avg(f, 1, DataType::f32, -2), UsageError);
  CHECK_THROWS_AS(scale_for_avg(f, 1, static_cast<DataType>(kDataTypeCount), 2), UsageError);
  scale_for_avg(nullptr, 0, DataType::f32, 4);  // nothing to do
}
