// bench-fusion-mixes-cxx: fusion_mixes.h compiled as C++20, as chorus-bench
// includes it. Its static_asserts check every mix's tensor count and
// parameter total at compile time; at run time, the lookup from C++.
#include <cstdio>

#include "fusion_mixes.h"

int main() {
  const chorus_bench_mix* r = chorus_bench_find_mix("resnet50");
  const chorus_bench_mix* b = chorus_bench_find_mix("bert-base");
  if (!r || r->count != 161 || r->total_elems != 25557032 || !b || b->count != 199 ||
      b->total_elems != 109482240 || chorus_bench_find_mix("resnet") != nullptr) {
    std::fprintf(stderr, "test_fusion_mixes_cxx: FAILED: lookup from C++\n");
    return 1;
  }
  std::printf("test_fusion_mixes_cxx: OK\n");
  return 0;
}
