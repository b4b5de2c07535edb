// chorus-bench --wire: float32 allreduce with compression on the wire
// (chorus_allreduce_ex). Parsing the list of wire dtypes, the error bound
// the check accepts, a data pattern whose sums fit the wire type's range,
// and the tolerant check that reports the largest relative error.
#pragma once

#include <chorus.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench_check.hpp"

namespace chorus_bench {

struct WireChoice {
  std::string name;      // "none", "bf16", "f16"
  chorus_dtype_t dtype;  // CHORUS_FLOAT32 (none), CHORUS_BFLOAT16, CHORUS_FLOAT16
};

// "none", "bf16", "f16" (also bfloat16, fp16, float16, half) or a comma list
// of them ("none,bf16": rows for both, interleaved per size). False (with
// *why) on an unknown name or an empty list.
bool parse_wires(const std::string& text, std::vector<WireChoice>* out, std::string* why);

// The relative error a float32 allreduce of values of one sign over `nranks`
// ranks may have with `wire` on the wire: (1 + u)^n - 1 with u = 2^-8 (bf16)
// or 2^-11 (f16), plus 2^-22 for avg's division and the float32 result (one
// rounding of each input and of each partial sum; include/chorus.h). 0 for
// CHORUS_FLOAT32 (the checks stay exact).
double wire_error_bound(chorus_dtype_t wire, int nranks);

// The pattern of -c 1 for float32 data sent as `wire`: float32's, with the
// period lowered so that every sum stays within float16's range for f16.
bool make_wire_pattern(chorus_dtype_t wire, const DtypeInfo& f32, chorus_op_t op, int nranks,
                       Pattern* p, std::string* why);

struct WireCheck {
  uint64_t wrong = 0;      // elements whose relative error exceeds the bound
  double max_rel_err = 0;  // the largest relative error (|got - want| / |want|; want 0: exact)
};
// Compares a float32 allreduce result (count elements) with p's reference.
WireCheck check_wire(const Pattern& p, size_t count, const float* out, double bound);

}  // namespace chorus_bench
