// chorus-bench's datatype table, float16 conversions, reference Pattern and
// element checking (see bench_check.hpp). Nothing here calls Chorus: the
// reference is computed on each rank from closed forms.
#include "bench_check.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

namespace chorus_bench {

namespace {

constexpr double kTwo53 = 9007199254740992.0;
const DtypeInfo kDtypes[] = {
    {"float32", CHORUS_FLOAT32, 4, 16777216.0},
    {"float64", CHORUS_FLOAT64, 8, kTwo53},
    {"float16", CHORUS_FLOAT16, 2, 2048.0},
    {"bfloat16", CHORUS_BFLOAT16, 2, 256.0},
    {"int8", CHORUS_INT8, 1, 127.0},
    {"uint8", CHORUS_UINT8, 1, 254.0},
    {"int32", CHORUS_INT32, 4, 2147483647.0},
    {"uint32", CHORUS_UINT32, 4, 4294967294.0},
    {"int64", CHORUS_INT64, 8, kTwo53},
    {"uint64", CHORUS_UINT64, 8, kTwo53},
};

}  // namespace

const DtypeInfo* find_dtype(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), ::tolower);
  static const std::pair<const char*, const char*> aliases[] = {
      {"float", "float32"}, {"f32", "float32"}, {"double", "float64"}, {"f64", "float64"},
      {"half", "float16"},  {"f16", "float16"}, {"bf16", "bfloat16"},  {"i8", "int8"},
      {"char", "int8"},     {"u8", "uint8"},    {"int", "int32"},      {"i32", "int32"},
      {"u32", "uint32"},    {"i64", "int64"},   {"u64", "uint64"},
  };
  for (auto& [alias, full] : aliases)
    if (name == alias) name = full;
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

// ---------------------------------------------------------------- element I/O

uint16_t float_to_half_exact(float f) {
  // Only used for small integers (exactly representable), so no rounding.
  if (f == 0.0f) return std::signbit(f) ? 0x8000 : 0;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000;
  int exp = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mant = (bits >> 13) & 0x3ff;
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | mant);
}

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// ------------------------------------------------------------ data & reference

double Pattern::value(int r, uint64_t g) const {
  if (reducing && op == CHORUS_PROD) return (g + static_cast<uint64_t>(r)) % 3 == 0 ? 2.0 : 1.0;
  if (reducing && (op == CHORUS_MIN || op == CHORUS_MAX))
    return static_cast<double>((g + 7ull * static_cast<uint64_t>(r)) % period);
  return static_cast<double>(g % period) + 2.0 * r;
}

double Pattern::reduced(uint64_t g) const {
  const double n = nranks;
  switch (op) {
    case CHORUS_SUM:
      return n * static_cast<double>(g % period) + n * (n - 1);
    case CHORUS_AVG:
      return static_cast<double>(g % period) + (n - 1);
    case CHORUS_PROD: {
      double p = 1;
      for (int r = 0; r < nranks; ++r) p *= value(r, g);
      return p;
    }
    case CHORUS_MIN:
    case CHORUS_MAX: {
      double best = value(0, g);
      for (int r = 1; r < nranks; ++r)
        best = op == CHORUS_MIN ? std::min(best, value(r, g)) : std::max(best, value(r, g));
      return best;
    }
    default:
      return std::nan("");
  }
}

bool make_pattern(Coll coll, const DtypeInfo& d, chorus_op_t op, int nranks, Pattern* p,
                  std::string* why) {
  p->op = op;
  p->reducing = coll == Coll::allreduce || coll == Coll::reduce_scatter;
  p->nranks = nranks;
  const double cap = 1 << 20;
  const double n = nranks;
  double period;
  if (!p->reducing) {
    period = d.limit - 2 * (n - 1) + 1;
  } else if (op == CHORUS_PROD) {
    if (std::ldexp(1.0, (nranks + 2) / 3) > d.limit) {
      *why = "products of " + std::to_string(nranks) + " ranks overflow " + d.name;
      return false;
    }
    period = 3;
  } else if (op == CHORUS_MIN || op == CHORUS_MAX) {
    period = d.limit + 1;
  } else {
    period = std::floor(d.limit / n) - n + 2;
  }
  if (period < 2) {
    *why = std::string("sums over ") + std::to_string(nranks) + " ranks overflow " + d.name;
    return false;
  }
  p->period = static_cast<uint64_t>(std::min(period, cap));
  return true;
}

// ------------------------------------------------------------------ checking

void write_input(Coll coll, chorus_dtype_t dtype, const Pattern& p, int rank, int root,
                 size_t count, void* in) {
  const size_t n = static_cast<size_t>(p.nranks);
  with_codec(dtype, [&](auto codec) {
    using C = decltype(codec);
    switch (coll) {
      case Coll::allreduce:
      case Coll::allgather:
        for (size_t i = 0; i < count; ++i) C::put(in, i, p.value(rank, i));
        break;
      case Coll::reduce_scatter:
        for (size_t i = 0; i < count * n; ++i) C::put(in, i, p.value(rank, i));
        break;
      case Coll::broadcast:
        if (rank == root)
          for (size_t i = 0; i < count; ++i) C::put(in, i, p.value(rank, i));
        break;
    }
  });
}

uint64_t count_wrong(Coll coll, chorus_dtype_t dtype, const Pattern& p, int rank, int root,
                     size_t count, const void* out) {
  const size_t n = static_cast<size_t>(p.nranks);
  uint64_t wrong = 0;
  with_codec(dtype, [&](auto codec) {
    using C = decltype(codec);
    switch (coll) {
      case Coll::allreduce:
        for (size_t i = 0; i < count; ++i) wrong += C::get(out, i) != p.reduced(i);
        break;
      case Coll::reduce_scatter: {
        const uint64_t base = static_cast<uint64_t>(rank) * count;
        for (size_t j = 0; j < count; ++j) wrong += C::get(out, j) != p.reduced(base + j);
        break;
      }
      case Coll::allgather:
        for (size_t src = 0; src < n; ++src) {
          const size_t base = src * count;
          for (size_t j = 0; j < count; ++j)
            wrong += C::get(out, base + j) != p.value(static_cast<int>(src), j);
        }
        break;
      case Coll::broadcast:
        for (size_t i = 0; i < count; ++i) wrong += C::get(out, i) != p.value(root, i);
        break;
    }
  });
  return wrong;
}

}  // namespace chorus_bench
