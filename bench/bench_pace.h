/* --pace-us: timed ops at a fixed rate instead of back to back, shared by
 * chorus-bench (C++) and mpi_allreduce_bench (C).
 *
 * A training step issues its allreduces at the step's rate, not back to back,
 * so what a collective costs the computation beside it is best compared at
 * the same rate of collectives: a library that finishes sooner then leaves
 * the CPU for longer, instead of packing more ops into the same second. With
 * a period P, each timed op starts P after the previous one started (at once
 * when that one took longer), the rank sleeping in between, and an op's time
 * is its own, not the sleep before it. */
#ifndef CHORUS_BENCH_PACE_H
#define CHORUS_BENCH_PACE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <time.h>

static inline double bench_monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sleeps until *next_start_s (CLOCK_MONOTONIC seconds; 0: no op yet), then
 * sets it to one period after now, the op's start, which it returns. */
static inline double bench_pace(double* next_start_s, double period_s) {
  double now = bench_monotonic_s();
  if (*next_start_s > now) {
    struct timespec until;
    until.tv_sec = (time_t)*next_start_s;
    until.tv_nsec = (long)((*next_start_s - (double)until.tv_sec) * 1e9);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
    }
    now = bench_monotonic_s();
  }
  *next_start_s = now + period_s;
  return now;
}

#endif /* CHORUS_BENCH_PACE_H */
