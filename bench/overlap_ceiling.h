/* The best overlap a machine allows an allreduce behind computation, shared
 * by chorus-bench overlap (C++) and mpi_allreduce_bench overlap (C).
 *
 * A step overlaps an allreduce (comm, wall time alone) with a computation
 * (compute, wall time alone). Perfect overlap takes ideal = max(comm,
 * compute). But both need CPU: the allreduce its copies, reductions and
 * socket calls (comm_cpu, the process's CPU time during the allreduce
 * alone), the computation its own (compute_cpu; 0 for a sleep). A rank that
 * has `cores` CPUs to itself cannot finish the step sooner than
 * (comm_cpu + compute_cpu) / cores, so the best step is
 *   best = max(ideal, (comm_cpu + compute_cpu) / cores)
 * and the best overlap figure, with serial = comm + compute,
 *   ceiling = (serial - best) / (serial - ideal), within [0, 1].
 * With the CPU free (a sleep, or a spare core) it is 1; with two ranks
 * computing on two cores it is what the allreduce leaves idle of its own
 * time. comm_cpu counts polling too: measure it with waits that sleep
 * (CHORUS_SPIN_US=0) for the allreduce's own work. */
#ifndef CHORUS_BENCH_OVERLAP_CEILING_H
#define CHORUS_BENCH_OVERLAP_CEILING_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <time.h>
#include <unistd.h>

/* CPU time of the whole process (every thread), in microseconds. */
static inline double bench_process_cpu_us(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* CPUs one rank has to itself, when all `nranks` ranks run on this machine:
 * those it may run on, at most its share of the machine's. */
static inline double bench_cores_per_rank(int nranks) {
  double online = (double)sysconf(_SC_NPROCESSORS_ONLN), allowed = online, share;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) allowed = (double)CPU_COUNT(&set);
  share = online / (double)(nranks > 0 ? nranks : 1);
  return allowed < share ? allowed : share;
}

static inline double bench_overlap_ceiling(double comm_us, double compute_us, double comm_cpu_us,
                                           double compute_cpu_us, double cores) {
  double serial = comm_us + compute_us;
  double ideal = comm_us > compute_us ? comm_us : compute_us;
  double cpu_bound = cores > 0 ? (comm_cpu_us + compute_cpu_us) / cores : serial;
  double best = cpu_bound > ideal ? cpu_bound : ideal;
  double ceiling;
  if (serial <= ideal) return 0;
  ceiling = (serial - best) / (serial - ideal);
  return ceiling < 0 ? 0 : ceiling > 1 ? 1 : ceiling;
}

#endif /* CHORUS_BENCH_OVERLAP_CEILING_H */
