// The bulk float32 <-> bfloat16 / float16 converters (dtype.hpp,
// convert.cpp) against the scalar conversions, which test_dtype.cpp checks
// against independent references: every 16-bit pattern widened, a spread of
// float32 bit patterns narrowed (specials, ties, subnormals), every length up
// to a few vectors and odd starting offsets, so that vector bodies and tails
// both run.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/core/dtype.hpp"
#include "base/core/error.hpp"

using namespace chorus;

namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Float32 inputs worth narrowing: specials, values on both sides of every
// rounding tie of both wire types, subnormals, and a stride through all
// bit patterns.
std::vector<float> narrowing_inputs() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          65504.0f,
                          65520.0f,
                          1e-8f,
                          -3e-6f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::denorm_min()};
  for (uint32_t u = 0; u < 0xFFFFFFFFu - 65521u; u += 65521u) {  // a prime stride
    v.push_back(from_bits(u));
    v.push_back(from_bits(u | 0x8000u));  // a bf16 tie
    v.push_back(from_bits(u | 0x1000u));  // an f16 tie (normal range)
    v.push_back(from_bits((u & ~0x1FFFu) | 0x1000u));
  }
  return v;
}

bool same_bits(uint16_t got, uint16_t want, bool f16) {
  const uint16_t exp_mask = f16 ? 0x7C00 : 0x7F80, man_mask = f16 ? 0x03FF : 0x007F;
  const bool got_nan = (got & exp_mask) == exp_mask && (got & man_mask);
  const bool want_nan = (want & exp_mask) == exp_mask && (want & man_mask);
  if (got_nan || want_nan) return got_nan && want_nan;
  return got == want;
}

}  // namespace

TEST_CASE("narrow_from_f32 gives the scalar conversions' bits", "[dtype][convert]") {
  const std::vector<float> in = narrowing_inputs();
  for (DataType wire : {DataType::bf16, DataType::f16}) {
    const bool f16 = wire == DataType::f16;
    std::vector<uint16_t> out(in.size() + 1, 0xABCD);
    narrow_from_f32(in.data(), out.data(), in.size(), wire);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const uint16_t want = f16 ? float_to_half(in[i]) : float_to_bf16(in[i]);
      if (!same_bits(out[i], want, f16) && bad++ < 5)
        FAIL_CHECK(dtype_name(wire)
                   << " input " << bits_of(in[i]) << ": " << out[i] << " != " << want);
    }
    CHECK(bad == 0);
    CHECK(out[in.size()] == 0xABCD);  // nothing written past the end
  }
}

TEST_CASE("widen_to_f32: every 16-bit pattern, divided or not", "[dtype][convert]") {
  std::vector<uint16_t> in(65536);
  for (uint32_t i = 0; i < 65536; ++i) in[i] = static_cast<uint16_t>(i);
  for (DataType wire : {DataType::bf16, DataType::f16}) {
    for (int divide_by : {1, 3, 4}) {
      std::vector<float> out(65537, 7.0f);
      widen_to_f32(in.data(), out.data(), in.size(), wire, divide_by);
      std::size_t bad = 0;
      for (uint32_t i = 0; i < 65536; ++i) {
        const float v = wire == DataType::f16 ? half_to_float(in[i]) : bf16_to_float(in[i]);
        const float want = v / static_cast<float>(divide_by);
        const bool ok = std::isnan(want) ? std::isnan(out[i]) : bits_of(out[i]) == bits_of(want);
        if (!ok && bad++ < 5)
          FAIL_CHECK(dtype_name(wire)
                     << " / " << divide_by << " pattern " << i << ": " << out[i] << " != " << want);
      }
      CHECK(bad == 0);
      CHECK(out[65536] == 7.0f);
    }
  }
}

TEST_CASE("bulk conversions: every length and offset, round trips", "[dtype][convert]") {
  std::vector<float> src(200);
  for (std::size_t i = 0; i < src.size(); ++i)
    src[i] = std::ldexp(1.0f + static_cast<float>(i) / 256.0f, static_cast<int>(i % 9) - 4);
  for (DataType wire : {DataType::bf16, DataType::f16}) {
    for (std::size_t offset : {0, 1, 3}) {
      for (std::size_t n = 0; n + offset <= 70; ++n) {
        std::vector<uint16_t> mid(n + 2, 0x5555);
        narrow_from_f32(src.data() + offset, mid.data() + 1, n, wire);
        CHECK(mid[0] == 0x5555);
        CHECK(mid[n + 1] == 0x5555);
        std::vector<float> back(n + 2, -1.0f);
        widen_to_f32(mid.data() + 1, back.data() + 1, n, wire);
        CHECK(back[0] == -1.0f);
        CHECK(back[n + 1] == -1.0f);
        for (std::size_t i = 0; i < n; ++i) {
          const float x = src[offset + i];
          const float want = wire == DataType::f16 ? half_to_float(float_to_half(x))
                                                   : bf16_to_float(float_to_bf16(x));
          CHECK(back[i + 1] == want);
          // Round to nearest: within half a unit of the wire type's last place.
          CHECK(std::fabs(back[i + 1] - x) <=
                std::ldexp(std::fabs(x), wire == DataType::f16 ? -11 : -8));
        }
      }
    }
  }
}

TEST_CASE("bulk conversions refuse other dtypes", "[dtype][convert]") {
  float f = 1;
  uint16_t h = 0;
  CHECK_THROWS_AS(narrow_from_f32(&f, &h, 1, DataType::f32), UsageError);
  CHECK_THROWS_AS(widen_to_f32(&h, &f, 1, DataType::i32), UsageError);
  CHECK_THROWS_AS(widen_to_f32(&h, &f, 1, DataType::bf16, 0), UsageError);
}
