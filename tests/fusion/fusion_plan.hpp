// What the fusion engine's tests share (test_fusion.cpp, the results and
// the engine's rounds; test_fusion_failures.cpp, the verdicts, refusals and
// compression): a model's 200 tensors of mixed sizes, dtypes and ops, the
// value every rank gives each element, and the reduction of those values as
// the dtype holds it, computed here independently of the library.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/core/dtype.hpp"
#include "include/chorus.h"

namespace chorus::test::fusion {

struct TensorPlan {
  std::string name;
  std::size_t count;
  chorus_dtype_t dtype;
  chorus_op_t op;
  bool in_place;
};

inline std::size_t elem_size(chorus_dtype_t d) {
  return chorus::dtype_size(static_cast<chorus::DataType>(d));
}

// 200 tensors from 1 element to 1 MiB (sizes grow as the cube of the index,
// so most are small, as a model's biases and norms are), of mixed dtypes and
// ops.
inline std::vector<TensorPlan> model_tensors(std::size_t n = 200) {
  const chorus_dtype_t dtypes[] = {CHORUS_FLOAT32, CHORUS_FLOAT64, CHORUS_INT32,  CHORUS_BFLOAT16,
                                   CHORUS_INT64,   CHORUS_UINT8,   CHORUS_FLOAT16};
  const chorus_op_t ops[] = {CHORUS_SUM, CHORUS_MAX, CHORUS_SUM, CHORUS_MIN, CHORUS_AVG};
  std::vector<TensorPlan> out;
  for (std::size_t i = 0; i < n; ++i) {
    const chorus_dtype_t dtype = dtypes[i % 7];
    chorus_op_t op = ops[i % 5];
    // avg is exact only where n divides the sum in the dtype's arithmetic:
    // kept to the floats, whose reference below divides the same way.
    if (op == CHORUS_AVG && dtype != CHORUS_FLOAT32 && dtype != CHORUS_FLOAT64) op = CHORUS_SUM;
    const double x = double(i) / double(n - 1);
    const std::size_t bytes = static_cast<std::size_t>(std::pow(2.0, 20.0 * x * x * x));
    const std::size_t count = std::max<std::size_t>(1, bytes / elem_size(dtype));
    out.push_back({"layer" + std::to_string(i) + (i % 2 ? ".weight" : ".bias"), count, dtype, op,
                   i % 3 == 0});
  }
  return out;
}

// Small integers: every sum, min, max is exact in every dtype (uint8 too:
// at most 4 ranks * 5).
inline int value(int rank, std::size_t tensor, std::size_t i, int step) {
  return static_cast<int>((std::size_t(rank) * 7 + tensor * 3 + i + std::size_t(step) * 5) % 5) + 1;
}

inline void store(void* base, chorus_dtype_t dtype, std::size_t i, double v) {
  switch (dtype) {
    case CHORUS_FLOAT32:
      static_cast<float*>(base)[i] = float(v);
      break;
    case CHORUS_FLOAT64:
      static_cast<double*>(base)[i] = v;
      break;
    case CHORUS_INT32:
      static_cast<int32_t*>(base)[i] = int32_t(v);
      break;
    case CHORUS_INT64:
      static_cast<int64_t*>(base)[i] = int64_t(v);
      break;
    case CHORUS_UINT8:
      static_cast<uint8_t*>(base)[i] = uint8_t(v);
      break;
    case CHORUS_BFLOAT16:
      static_cast<uint16_t*>(base)[i] = chorus::float_to_bf16(float(v));
      break;
    case CHORUS_FLOAT16:
      static_cast<uint16_t*>(base)[i] = chorus::float_to_half(float(v));
      break;
    default:
      break;
  }
}

inline double load(const void* base, chorus_dtype_t dtype, std::size_t i) {
  switch (dtype) {
    case CHORUS_FLOAT32:
      return static_cast<const float*>(base)[i];
    case CHORUS_FLOAT64:
      return static_cast<const double*>(base)[i];
    case CHORUS_INT32:
      return static_cast<const int32_t*>(base)[i];
    case CHORUS_INT64:
      return double(static_cast<const int64_t*>(base)[i]);
    case CHORUS_UINT8:
      return static_cast<const uint8_t*>(base)[i];
    case CHORUS_BFLOAT16:
      return chorus::bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    case CHORUS_FLOAT16:
      return chorus::half_to_float(static_cast<const uint16_t*>(base)[i]);
    default:
      return NAN;
  }
}

// The reduction of every rank's value, as the dtype holds it.
inline double expected(const TensorPlan& t, std::size_t tensor, std::size_t i, int step, int n) {
  double acc = value(0, tensor, i, step);
  for (int r = 1; r < n; ++r) {
    const double v = value(r, tensor, i, step);
    if (t.op == CHORUS_MAX)
      acc = std::max(acc, v);
    else if (t.op == CHORUS_MIN)
      acc = std::min(acc, v);
    else
      acc += v;
  }
  if (t.op == CHORUS_AVG)
    return t.dtype == CHORUS_FLOAT32 ? double(float(acc) / float(n)) : acc / n;
  return acc;
}

// Zeros (which the checks below refuse) if the call fails.
inline chorus_fusion_stats_t stats_of(chorus_comm_t comm) {
  chorus_fusion_stats_t s{};
  s.size = sizeof s;
  if (chorus_fusion_stats(comm, &s) != CHORUS_SUCCESS) s = chorus_fusion_stats_t{};
  return s;
}

}  // namespace chorus::test::fusion
