/* What mpi_allreduce_bench's modes share: the sweep (mpi_allreduce_bench.c),
 * the tensor-fusion step (mpi_fusion.c) and the overlap step (mpi_overlap.c).
 * Plain C11 over MPI. */
#ifndef CHORUS_MPI_BENCH_H
#define CHORUS_MPI_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* The data chorus-bench checks with (bench/bench_check.hpp, Pattern): the
 * value rank r holds at global element g, and what reducing every rank's
 * gives, both exact in the checked dtype for `period` as chorus-bench sets it. */
typedef struct {
  int nranks;
  int op; /* 0 sum, 1 prod, 2 min, 3 max */
  uint64_t period;
} mpi_bench_pattern;

double mpi_bench_value(const mpi_bench_pattern* p, int r, uint64_t g);
double mpi_bench_reduced(const mpi_bench_pattern* p, uint64_t g);

/* `bytes` (at least 64, rounded up to whole pages), page aligned and every
 * page touched, outside any timed region; MPI_Abort on failure. */
void* mpi_bench_alloc_touched(size_t bytes);

/* The subcommands: argv[0] is the subcommand's name. */
int mpi_fusion_main(int argc, char** argv, int rank, int nranks);
int mpi_overlap_main(int argc, char** argv, int rank, int nranks);

#endif /* CHORUS_MPI_BENCH_H */
