// Figures shared by chorus-bench's subcommands: a median, and the largest of
// one value over the ranks (a step is as slow as its slowest rank).
#pragma once

#include <chorus.h>

#include <vector>

#include "bench_common.h"

inline double bench_median(std::vector<double> v) {
  return bench_median_sorting(v.data(), static_cast<int>(v.size()));
}

inline double bench_max_over_ranks(chorus_comm_t comm, double value) {
  double out = value;
  chorus_allreduce(comm, &value, &out, 1, CHORUS_FLOAT64, CHORUS_MAX, 0);
  return out;
}
