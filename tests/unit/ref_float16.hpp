// Reference 16-bit float formats for the tests (test_dtype.cpp, the kernels;
// test_float16.cpp, the conversions), written independently of
// base/core/half.hpp: decoded with ldexp, encoded with frexp/ldexp and an
// explicit round-half-to-even on the scaled significand, all in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace chorus::test {

// Reference 16-bit float formats. p: significand bits including the implicit
// one; ebits: exponent bits. f16: (11, 5); bf16: (8, 8).
struct Format {
  int p;
  int ebits;
  int mbits() const { return p - 1; }
  int bias() const { return (1 << (ebits - 1)) - 1; }
  uint16_t exp_mask() const { return static_cast<uint16_t>(((1 << ebits) - 1) << mbits()); }
  uint16_t man_mask() const { return static_cast<uint16_t>((1 << mbits()) - 1); }
  bool is_nan(uint16_t bits) const {
    return (bits & exp_mask()) == exp_mask() && (bits & man_mask()) != 0;
  }
};
constexpr Format kHalf{11, 5};
constexpr Format kBf16{8, 8};

inline double ref_decode(uint16_t bits, Format f) {
  const int e = (bits & f.exp_mask()) >> f.mbits();
  const int m = bits & f.man_mask();
  double v;
  if (e == (1 << f.ebits) - 1)
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (e == 0)
    v = std::ldexp(static_cast<double>(m), 1 - f.bias() - f.mbits());
  else
    v = std::ldexp(static_cast<double>(m + (1 << f.mbits())), e - f.bias() - f.mbits());
  return (bits & 0x8000) ? -v : v;
}

// Round x to the format, to nearest, ties to even. NaN gives some quiet NaN.
inline uint16_t ref_encode(double x, Format f) {
  const int mbits = f.mbits();
  const int emin = 1 - f.bias();
  const int emax = f.bias();
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return static_cast<uint16_t>(sign | f.exp_mask() | (1 << (mbits - 1)));
  const double a = std::fabs(x);
  if (std::isinf(a)) return static_cast<uint16_t>(sign | f.exp_mask());
  if (a == 0) return sign;
  int fe = 0;
  std::frexp(a, &fe);  // a = g * 2^fe, g in [0.5, 1): the exponent is fe - 1
  int e = std::max(fe - 1, emin);
  double q = std::ldexp(a, mbits - e);  // a / quantum, exact
  double fl = std::floor(q);
  const double frac = q - fl;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(fl, 2.0) != 0)) fl += 1;
  if (fl >= std::ldexp(1.0, f.p)) {  // rounded up into the next binade
    fl /= 2;
    e += 1;
  }
  if (e > emax) return static_cast<uint16_t>(sign | f.exp_mask());
  const auto r = static_cast<uint32_t>(fl);
  if (r < (1u << mbits)) return static_cast<uint16_t>(sign | r);  // subnormal
  return static_cast<uint16_t>(sign | ((e + f.bias()) << mbits) | (r - (1u << mbits)));
}

template <class To, class From>
inline To bits_of(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}

}  // namespace chorus::test
