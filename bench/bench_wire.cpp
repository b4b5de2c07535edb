#include "bench_wire.hpp"

#include <cctype>
#include <cmath>
#include <sstream>

namespace chorus_bench {

bool parse_wires(const std::string& text, std::vector<WireChoice>* out, std::string* why) {
  out->clear();
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    for (auto& ch : item) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (item == "none" || item == "f32" || item == "float32")
      out->push_back({"none", CHORUS_FLOAT32});
    else if (item == "bf16" || item == "bfloat16")
      out->push_back({"bf16", CHORUS_BFLOAT16});
    else if (item == "f16" || item == "fp16" || item == "float16" || item == "half")
      out->push_back({"f16", CHORUS_FLOAT16});
    else {
      *why = "unknown wire dtype '" + item + "' (none, bf16, f16)";
      return false;
    }
  }
  if (out->empty()) *why = "no wire dtype given";
  return !out->empty();
}

double wire_error_bound(chorus_dtype_t wire, int nranks) {
  if (wire != CHORUS_BFLOAT16 && wire != CHORUS_FLOAT16) return 0;
  const double u = std::ldexp(1.0, wire == CHORUS_BFLOAT16 ? -8 : -11);
  return std::pow(1 + u, nranks) - 1 + std::ldexp(1.0, -22);
}

bool make_wire_pattern(chorus_dtype_t wire, const DtypeInfo& f32, chorus_op_t op, int nranks,
                       Pattern* p, std::string* why) {
  DtypeInfo d = f32;
  if (wire == CHORUS_FLOAT16) d.limit = 65504;  // float16's largest finite value
  return make_pattern(Coll::allreduce, d, op, nranks, p, why);
}

WireCheck check_wire(const Pattern& p, size_t count, const float* out, double bound) {
  WireCheck result;
  for (size_t i = 0; i < count; ++i) {
    const double want = p.reduced(i);
    const double got = out[i];
    double err;
    if (want == 0)
      err = got == 0 ? 0 : INFINITY;
    else
      err = std::fabs(got - want) / std::fabs(want);
    if (!(err <= bound)) ++result.wrong;  // NaN counts as wrong
    if (!(err <= result.max_rel_err)) result.max_rel_err = err;
  }
  return result;
}

}  // namespace chorus_bench
