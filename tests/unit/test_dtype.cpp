// Data types, ops and the reduce kernels' table and edge cases: integer
// wrap-around, NaN and IEEE sums (the sweep of every kernel against its
// reference and scale_for_avg: test_kernels.cpp; the f16/bf16 conversions:
// test_float16.cpp).
//
// References, here and in test_kernels.cpp, are written independently of base/core/dtype.cpp (the
// 16-bit floats' in ref_float16.hpp: decoded with ldexp and encoded with
// frexp/ldexp and an explicit round-half-to-even on the scaled significand,
// all in double). Results of f16, bf16 and f32 kernels must equal the
// correctly rounded result of the exact operation: double holds the exact
// product of two such values, and for sums (and the avg division) rounding
// twice, first to double then to the target, is innocuous because
// 53 >= 2p + 2 (and f32 >= 2p + 2 for f16 and bf16, which is why the library
// may compute those through f32).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "base/core/dtype.hpp"
#include "base/core/error.hpp"
#include "tests/unit/ref_float16.hpp"

using namespace chorus;
using namespace chorus::test;

TEST_CASE("dtype names, sizes and parsing", "[dtype]") {
  struct Row {
    DataType t;
    const char* name;
    std::size_t size;
    std::vector<const char*> aliases;
  };
  const Row rows[] = {
      {DataType::f32, "float32", 4, {"float32", "f32", "float", "FLOAT32"}},
      {DataType::f64, "float64", 8, {"float64", "f64", "double"}},
      {DataType::f16, "float16", 2, {"float16", "f16", "half"}},
      {DataType::bf16, "bfloat16", 2, {"bfloat16", "bf16"}},
      {DataType::i8, "int8", 1, {"int8", "i8"}},
      {DataType::u8, "uint8", 1, {"uint8", "u8"}},
      {DataType::i32, "int32", 4, {"int32", "i32", "int"}},
      {DataType::u32, "uint32", 4, {"uint32", "u32"}},
      {DataType::i64, "int64", 8, {"int64", "i64"}},
      {DataType::u64, "uint64", 8, {"uint64", "u64"}},
  };
  REQUIRE(std::size(rows) == static_cast<std::size_t>(kDataTypeCount));
  for (const auto& r : rows) {
    CHECK(dtype_name(r.t) == r.name);
    CHECK(dtype_size(r.t) == r.size);
    CHECK(valid_dtype(static_cast<int>(r.t)));
    CHECK(parse_dtype(dtype_name(r.t)) == r.t);
    for (const char* alias : r.aliases) {
      INFO(alias);
      CHECK(parse_dtype(alias) == r.t);
    }
  }
  CHECK_FALSE(valid_dtype(-1));
  CHECK_FALSE(valid_dtype(kDataTypeCount));
  for (const char* bad : {"", "float8", "int16", "f 32", "complex64", "float32 ", "i"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_AS(parse_dtype(bad), UsageError);
  }
  CHECK_THROWS_AS(dtype_size(static_cast<DataType>(kDataTypeCount)), UsageError);
  CHECK_THROWS_AS(dtype_name(static_cast<DataType>(200)), UsageError);
}

TEST_CASE("op names and parsing", "[dtype]") {
  const char* names[] = {"sum", "prod", "min", "max", "avg"};
  for (int i = 0; i < kReduceOpCount; ++i) {
    const auto op = static_cast<ReduceOp>(i);
    CHECK(op_name(op) == names[i]);
    CHECK(parse_op(names[i]) == op);
    CHECK(valid_op(i));
  }
  CHECK(parse_op("SUM") == ReduceOp::sum);
  CHECK_FALSE(valid_op(-1));
  CHECK_FALSE(valid_op(kReduceOpCount));
  for (const char* bad : {"", "add", "mean", "band", "summ"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_AS(parse_op(bad), UsageError);
  }
  CHECK_THROWS_AS(op_name(static_cast<ReduceOp>(kReduceOpCount)), UsageError);
}

TEST_CASE("reduce_fn table", "[dtype][kernel]") {
  for (int t = 0; t < kDataTypeCount; ++t)
    for (int o = 0; o < kReduceOpCount; ++o) {
      const auto dt = static_cast<DataType>(t);
      const auto op = static_cast<ReduceOp>(o);
      CHECK(reduce_fn(dt, op) != nullptr);
      CHECK(reduce_fn_portable(dt, op) != nullptr);
    }
  for (int t = 0; t < kDataTypeCount; ++t) {
    const auto dt = static_cast<DataType>(t);
    CHECK(reduce_fn(dt, ReduceOp::avg) == reduce_fn(dt, ReduceOp::sum));
  }
  CHECK_THROWS_AS(reduce_fn(static_cast<DataType>(kDataTypeCount), ReduceOp::sum), UsageError);
  CHECK_THROWS_AS(reduce_fn(DataType::f32, static_cast<ReduceOp>(kReduceOpCount)), UsageError);
  CHECK((reduce_isa() == "avx2" || reduce_isa() == "default"));
  // Zero elements: no access at all, null pointers allowed.
  for (int t = 0; t < kDataTypeCount; ++t)
    reduce_fn(static_cast<DataType>(t), ReduceOp::sum)(nullptr, nullptr, nullptr, 0);
}

TEST_CASE("integer sum and prod wrap around", "[kernel]") {
  for (auto get : {&reduce_fn, &reduce_fn_portable}) {
    {
      int8_t a[] = {127, -128, 100, -1, 64};
      int8_t b[] = {1, -1, 100, 1, 2};
      int8_t d[5];
      get(DataType::i8, ReduceOp::sum)(d, a, b, 5);
      CHECK(d[0] == -128);
      CHECK(d[1] == 127);
      CHECK(d[2] == -56);
      CHECK(d[3] == 0);
      get(DataType::i8, ReduceOp::prod)(d, a, b, 5);
      CHECK(d[0] == 127);
      CHECK(d[1] == -128);  // -128 * -1 = 128 wraps to -128
      CHECK(d[2] == 16);    // 10000 mod 256
      CHECK(d[4] == -128);  // 128 wraps
    }
    {
      uint8_t a[] = {255, 200, 16};
      uint8_t b[] = {1, 100, 16};
      uint8_t d[3];
      get(DataType::u8, ReduceOp::sum)(d, a, b, 3);
      CHECK(d[0] == 0);
      CHECK(d[1] == 44);
      get(DataType::u8, ReduceOp::prod)(d, a, b, 3);
      CHECK(d[2] == 0);
    }
    {
      const int32_t mx = std::numeric_limits<int32_t>::max();
      const int32_t mn = std::numeric_limits<int32_t>::min();
      int32_t a[] = {mx, mn, mx, 65536};
      int32_t b[] = {1, -1, mx, 65536};
      int32_t d[4];
      get(DataType::i32, ReduceOp::sum)(d, a, b, 4);
      CHECK(d[0] == mn);
      CHECK(d[1] == mx);
      CHECK(d[2] == -2);
      get(DataType::i32, ReduceOp::prod)(d, a, b, 4);
      CHECK(d[2] == 1);  // (2^31 - 1)^2 = 2^62 - 2^32 + 1
      CHECK(d[3] == 0);
    }
    {
      const int64_t mx = std::numeric_limits<int64_t>::max();
      const int64_t mn = std::numeric_limits<int64_t>::min();
      int64_t a[] = {mx, mn, mn};
      int64_t b[] = {1, -1, -1};
      int64_t d[3];
      get(DataType::i64, ReduceOp::sum)(d, a, b, 3);
      CHECK(d[0] == mn);
      CHECK(d[1] == mx);
      get(DataType::i64, ReduceOp::prod)(d, a, b, 3);
      CHECK(d[2] == mn);
      uint64_t ua[] = {~uint64_t{0}, uint64_t{1} << 63};
      uint64_t ub[] = {~uint64_t{0}, 2};
      uint64_t ud[2];
      get(DataType::u64, ReduceOp::sum)(ud, ua, ub, 2);
      CHECK(ud[0] == ~uint64_t{0} - 1);
      CHECK(ud[1] == (uint64_t{1} << 63) + 2);
      get(DataType::u64, ReduceOp::prod)(ud, ua, ub, 2);
      CHECK(ud[0] == 1);
      CHECK(ud[1] == 0);
    }
    {
      uint32_t a[] = {0xFFFFFFFFu, 7};
      uint32_t b[] = {2, 0xFFFFFFFFu};
      uint32_t d[2];
      get(DataType::u32, ReduceOp::sum)(d, a, b, 2);
      CHECK(d[0] == 1);
      CHECK(d[1] == 6);
      get(DataType::u32, ReduceOp::min)(d, a, b, 2);
      CHECK(d[0] == 2);
      CHECK(d[1] == 7);
    }
  }
}

TEST_CASE("float min/max propagate NaN; sums follow IEEE", "[kernel]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (auto get : {&reduce_fn, &reduce_fn_portable}) {
    float a[] = {nan, 1.0f, nan, -inf, 2.0f, -0.0f, 0.0f};
    float b[] = {1.0f, nan, nan, 5.0f, -3.0f, 0.0f, -0.0f};
    float d[7];
    get(DataType::f32, ReduceOp::min)(d, a, b, 7);
    CHECK(std::isnan(d[0]));
    CHECK(std::isnan(d[1]));
    CHECK(std::isnan(d[2]));
    CHECK(d[3] == -inf);
    CHECK(d[4] == -3.0f);
    CHECK(d[5] == 0.0f);  // equal: the second argument
    CHECK_FALSE(std::signbit(d[5]));
    CHECK(std::signbit(d[6]));
    get(DataType::f32, ReduceOp::max)(d, a, b, 7);
    CHECK(std::isnan(d[0]));
    CHECK(std::isnan(d[1]));
    CHECK(d[3] == 5.0f);
    CHECK(d[4] == 2.0f);
    float c[] = {inf, 3e38f, 1.0f};
    float e[] = {-inf, 3e38f, 0x1p-24f};
    get(DataType::f32, ReduceOp::sum)(d, c, e, 3);
    CHECK(std::isnan(d[0]));
    CHECK(d[1] == inf);
    CHECK(d[2] == 1.0f);  // tie, rounds to even

    // f16: 2048 + 1 is a tie between 2048 and 2050 -> 2048; 2048 + 3 -> 2052.
    uint16_t h[] = {float_to_half(2048.f), float_to_half(2048.f), float_to_half(65504.f),
                    float_to_half(nan), 0x0001};
    uint16_t k[] = {float_to_half(1.f), float_to_half(3.f), float_to_half(65504.f),
                    float_to_half(1.f), 0x0001};
    uint16_t r[5];
    get(DataType::f16, ReduceOp::sum)(r, h, k, 5);
    CHECK(half_to_float(r[0]) == 2048.f);
    CHECK(half_to_float(r[1]) == 2052.f);
    CHECK(r[2] == 0x7C00);  // overflow to +inf
    CHECK(std::isnan(half_to_float(r[3])));
    CHECK(r[4] == 0x0002);  // subnormals add exactly
    get(DataType::f16, ReduceOp::max)(r, h, k, 5);
    CHECK(std::isnan(half_to_float(r[3])));
    get(DataType::f16, ReduceOp::min)(r, k, h, 5);
    CHECK(std::isnan(half_to_float(r[3])));

    // bf16: 256 + 1 is a tie between 256 and 258 -> 256.
    uint16_t p[] = {float_to_bf16(256.f), float_to_bf16(256.f)};
    uint16_t q[] = {float_to_bf16(1.f), float_to_bf16(3.f)};
    get(DataType::bf16, ReduceOp::sum)(r, p, q, 2);
    CHECK(bf16_to_float(r[0]) == 256.f);
    CHECK(bf16_to_float(r[1]) == 260.f);
  }
}
