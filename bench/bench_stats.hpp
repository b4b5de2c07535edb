// Figures shared by chorus-bench's subcommands: a median, the largest of one
// value over the ranks (a step is as slow as its slowest rank), and a rank's
// median, mean and fastest time each so reduced.
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

// A rank's median, mean and fastest time, each then the maximum over the
// ranks (as mpi_allreduce_bench reports them).
struct BenchTimes {
  double median = 0, mean = 0, min = 0;
};

inline BenchTimes bench_times_over_ranks(chorus_comm_t comm, const std::vector<double>& times) {
  double mine[3] = {bench_median(times), 0, times.empty() ? 0 : times[0]};
  for (double t : times) {
    mine[1] += t;
    mine[2] = t < mine[2] ? t : mine[2];
  }
  if (!times.empty()) mine[1] /= double(times.size());
  double all[3] = {mine[0], mine[1], mine[2]};
  chorus_allreduce(comm, mine, all, 3, CHORUS_FLOAT64, CHORUS_MAX, 0);
  return {all[0], all[1], all[2]};
}
