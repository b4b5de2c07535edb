/* --period-us: timed ops at a training step's rate instead of back to back,
 * shared by chorus-bench (C++) and mpi_allreduce_bench (C).
 *
 * A training step computes, then reduces its gradients: its ranks meet at
 * each collective with the skew their computations and wake-ups leave, and
 * a waiting rank has had time to go to sleep; and a library that finishes
 * sooner leaves the CPU to the computation for longer, rather than packing
 * more collectives into the same second. With a period P, every timed op
 * starts at the first multiple of P of the wall clock after the previous op
 * ended, the rank sleeping until then. The wall clock is one on a host (and
 * NTP-close across hosts), so the ranks wake for the same op together, each
 * with its own wake-up delay; an op longer than P skips to the next multiple.
 * While ops are shorter than P, a run takes P per op with any library, so a
 * CPU load beside it (compare.py --load) meets the same collectives per
 * second from each. A row's time is the ops' own, from wake-up to return. */
#ifndef CHORUS_BENCH_PERIOD_H
#define CHORUS_BENCH_PERIOD_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <time.h>

static inline double bench_monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sleeps until the next multiple of `period_us` microseconds of the wall
 * clock (CLOCK_REALTIME), through signals. */
static inline void bench_sleep_to_next_period(double period_us) {
  int64_t period_ns = (int64_t)(period_us * 1e3), next_ns;
  struct timespec now, until;
  if (period_ns < 1) period_ns = 1;
  clock_gettime(CLOCK_REALTIME, &now);
  next_ns = ((int64_t)now.tv_sec * 1000000000 + now.tv_nsec) / period_ns * period_ns + period_ns;
  until.tv_sec = (time_t)(next_ns / 1000000000);
  until.tv_nsec = (long)(next_ns % 1000000000);
  while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &until, NULL) == EINTR) {
  }
}

#endif /* CHORUS_BENCH_PERIOD_H */
