// chorus-bench's data and reference results, independent of Chorus itself:
// the datatype table, element codecs (including float16/bfloat16), the
// closed-form Pattern every rank fills its inputs from, and the element-wise
// comparison of an op's result with that reference (-c 1).
#pragma once

#include <chorus.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace chorus_bench {

enum class Coll { allreduce, allgather, broadcast, reduce_scatter };

struct DtypeInfo {
  const char* name;
  chorus_dtype_t dtype;
  size_t size;
  double limit;  // largest value represented exactly (and below the 0xFF.. sentinel)
};

// The datatype named `name` (case-insensitive; aliases such as f32, half, bf16),
// or nullptr.
const DtypeInfo* find_dtype(std::string name);

// ---------------------------------------------------------------- element I/O

uint16_t float_to_half_exact(float f);
float half_to_float(uint16_t h);

template <typename T>
struct Codec {
  static void put(void* p, size_t i, double v) { static_cast<T*>(p)[i] = static_cast<T>(v); }
  static double get(const void* p, size_t i) {
    return static_cast<double>(static_cast<const T*>(p)[i]);
  }
};
struct HalfCodec {
  static void put(void* p, size_t i, double v) {
    static_cast<uint16_t*>(p)[i] = float_to_half_exact(static_cast<float>(v));
  }
  static double get(const void* p, size_t i) {
    return half_to_float(static_cast<const uint16_t*>(p)[i]);
  }
};
struct Bf16Codec {
  static void put(void* p, size_t i, double v) {
    float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(bits >> 16);
  }
  static double get(const void* p, size_t i) {
    uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(p)[i]) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

// Calls fn.template operator()<Codec>() for the dtype.
template <typename Fn>
void with_codec(chorus_dtype_t dtype, Fn&& fn) {
  switch (dtype) {
    case CHORUS_FLOAT32:
      return fn(Codec<float>{});
    case CHORUS_FLOAT64:
      return fn(Codec<double>{});
    case CHORUS_FLOAT16:
      return fn(HalfCodec{});
    case CHORUS_BFLOAT16:
      return fn(Bf16Codec{});
    case CHORUS_INT8:
      return fn(Codec<int8_t>{});
    case CHORUS_UINT8:
      return fn(Codec<uint8_t>{});
    case CHORUS_INT32:
      return fn(Codec<int32_t>{});
    case CHORUS_UINT32:
      return fn(Codec<uint32_t>{});
    case CHORUS_INT64:
      return fn(Codec<int64_t>{});
    case CHORUS_UINT64:
      return fn(Codec<uint64_t>{});
    default:
      std::abort();
  }
}

// ------------------------------------------------------------ data & reference
//
// Rank r's element at global index g is value(r, g):
//   sum/avg (and non-reducing collectives): (g mod M) + 2r
//   min/max:                                (g + 7r) mod M
//   prod:                                   2 if (g + r) mod 3 == 0 else 1
// M is the largest period (at most 2^20) for which every partial result is an
// integer the dtype holds exactly, so float sums are exact and the reference
// is exact: sum = N(g mod M) + N(N-1), avg = (g mod M) + N - 1.
struct Pattern {
  chorus_op_t op;
  bool reducing;
  int nranks;
  uint64_t period;

  double value(int r, uint64_t g) const;
  double reduced(uint64_t g) const;
};

// Returns false (with *why) when the dtype cannot hold exact results at this rank count.
bool make_pattern(Coll coll, const DtypeInfo& d, chorus_op_t op, int nranks, Pattern* p,
                  std::string* why);

// The checked op of one row, `count` elements per rank as passed to the API,
// p.nranks ranks. write_input fills rank `rank`'s send data at `in` (the full
// count * nranks elements for reduce-scatter; for broadcast, the root's
// buffer, and nothing on other ranks). count_wrong returns how many elements
// of the result at `out` (this rank's count for reduce-scatter, the gathered
// count * nranks for allgather) differ from the reference.
void write_input(Coll coll, chorus_dtype_t dtype, const Pattern& p, int rank, int root,
                 size_t count, void* in);
uint64_t count_wrong(Coll coll, chorus_dtype_t dtype, const Pattern& p, int rank, int root,
                     size_t count, const void* out);

}  // namespace chorus_bench
