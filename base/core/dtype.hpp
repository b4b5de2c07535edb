// Data types, reduction ops and reduce kernels.
//
// Kernels compute dst[i] = a[i] (op) b[i] for i < count; dst may alias a or b
// (but must not partially overlap them). They are plain loops over restrict
// pointers so the compiler vectorises them. f16 and bf16 are widened to f32,
// reduced, and rounded back to nearest-even. AVG is SUM followed by
// scale_for_avg(n) once, by whoever owns the final value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "include/chorus.h"

namespace chorus {

enum class DataType : uint8_t {
  f32 = CHORUS_FLOAT32,
  f64 = CHORUS_FLOAT64,
  f16 = CHORUS_FLOAT16,
  bf16 = CHORUS_BFLOAT16,
  i8 = CHORUS_INT8,
  u8 = CHORUS_UINT8,
  i32 = CHORUS_INT32,
  u32 = CHORUS_UINT32,
  i64 = CHORUS_INT64,
  u64 = CHORUS_UINT64,
};
inline constexpr int kDataTypeCount = CHORUS_DTYPE_COUNT_;

enum class ReduceOp : uint8_t {
  sum = CHORUS_SUM,
  prod = CHORUS_PROD,
  min = CHORUS_MIN,
  max = CHORUS_MAX,
  avg = CHORUS_AVG,
};
inline constexpr int kReduceOpCount = CHORUS_OP_COUNT_;

// Inline: every call checks and sizes its buffers, and fused calls come by
// the thousand per step.
inline bool valid_dtype(int value) {
  return value >= 0 && value < kDataTypeCount;
}
inline bool valid_op(int value) {
  return value >= 0 && value < kReduceOpCount;
}
[[noreturn]] void throw_unknown_dtype(DataType dtype);
inline std::size_t dtype_size(DataType dtype) {
  switch (dtype) {
    case DataType::i8:
    case DataType::u8:
      return 1;
    case DataType::f16:
    case DataType::bf16:
      return 2;
    case DataType::f32:
    case DataType::i32:
    case DataType::u32:
      return 4;
    case DataType::f64:
    case DataType::i64:
    case DataType::u64:
      return 8;
  }
  throw_unknown_dtype(dtype);
}
std::string_view dtype_name(DataType dtype);  // "float32", "bfloat16", "int8", ...
std::string_view op_name(ReduceOp op);        // "sum", "prod", "min", "max", "avg"
// Parse the names above (also the short forms f32, bf16, i32, ... for dtypes).
// Throw UsageError on unknown names.
DataType parse_dtype(std::string_view name);
ReduceOp parse_op(std::string_view name);

using ReduceFn = void (*)(void* dst, const void* a, const void* b, std::size_t count);
// The kernel for (dtype, op); AVG returns the SUM kernel.
ReduceFn reduce_fn(DataType dtype, ReduceOp op);
// The same kernel built for the baseline ISA only. reduce_fn may return a
// variant for a wider ISA (AVX2/F16C) chosen at run time; both give identical
// results (NaN payloads aside). For tests and benchmarks.
ReduceFn reduce_fn_portable(DataType dtype, ReduceOp op);
// The ISA of the kernels reduce_fn returns: "avx2" or "default".
std::string_view reduce_isa();

// data[i] /= n, in the dtype's own arithmetic (integers truncate toward zero,
// f16/bf16 through f32 with round-to-nearest-even).
void scale_for_avg(void* data, std::size_t count, DataType dtype, int n);

// IEEE binary16 and bfloat16 <-> float32, round to nearest even, NaN kept NaN.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

// The same conversions in bulk (vectorised; AVX2/F16C where the CPU has
// them, bit-identical to the scalar ones above): float32 -> `to` (bf16 or
// f16) and `from` (bf16 or f16) -> float32, each value then divided by
// `divide_by` in float32 (1: not divided; an average's final step). Buffers
// must not overlap. Throws UsageError for another dtype. (convert.cpp)
void narrow_from_f32(const float* src, void* dst, std::size_t count, DataType to);
void widen_to_f32(const void* src, float* dst, std::size_t count, DataType from, int divide_by = 1);

}  // namespace chorus
