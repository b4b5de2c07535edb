/* mpi_allreduce_bench: MPI_Allreduce timed exactly as chorus-bench times
 * chorus_allreduce, with the same flags, iteration rule, columns and JSON, so
 * bench/compare.py can put the two side by side.
 *
 *   mpirun -np 2 --mca btl tcp,self mpi_allreduce_bench -b 8 -e 256M -f 2
 *   mpirun -np 2 --mca btl tcp,self mpi_allreduce_bench fusion -N 1000 -b 4K
 *   mpirun -np 2 --mca btl tcp,self mpi_allreduce_bench fusion --mix resnet50
 *
 * The second and third form are the Open MPI side of the tensor-fusion
 * benchmark (mpi_fusion.c, docs/benchmarks.md "Tensor fusion").
 *
 * For each size: MPI_Barrier, warm-up ops, MPI_Barrier, `iters` back-to-back
 * timed ops; the time is the maximum over ranks of the per-rank average
 * (MPI_MAX after the timed region). With -c 1 one more op on fresh data is
 * checked element by element against the closed-form result (the same data
 * pattern as chorus-bench). Only rank 0 prints. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* clock_nanosleep, clock_gettime (bench_period.h) under -std=c11 */
#endif
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_period.h"
#include "mpi_bench.h"

typedef struct {
  const char* name;
  MPI_Datatype type;
  size_t size;
  double limit; /* largest exactly representable value used by the check */
} dtype_info;

typedef struct {
  const char* name;
  MPI_Op op;
} op_info;

static void usage(void) {
  fprintf(stderr,
          "usage: mpi_allreduce_bench [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-w WARMUP] "
          "[-n ITERS]\n"
          "         [--iter-bytes B] [--period-us US] [-c 0|1] [-d float32|float64|int32|int64] "
          "[-o sum|prod|min|max]\n"
          "         [-i|--inplace 0|1] [-J|--json]\n"
          "       mpi_allreduce_bench fusion --help   (the tensor-fusion benchmark)\n"
          "       mpi_allreduce_bench overlap --help  (allreduce behind computation)\n");
}

double mpi_bench_value(const mpi_bench_pattern* p, int r, uint64_t g) {
  if (p->op == 1) return (g + (uint64_t)r) % 3 == 0 ? 2.0 : 1.0;
  if (p->op == 2 || p->op == 3) return (double)((g + 7ull * (uint64_t)r) % p->period);
  return (double)(g % p->period) + 2.0 * r;
}

double mpi_bench_reduced(const mpi_bench_pattern* p, uint64_t g) {
  double n = p->nranks, best, product;
  int r;
  switch (p->op) {
    case 0:
      return n * (double)(g % p->period) + n * (n - 1);
    case 1:
      product = 1;
      for (r = 0; r < p->nranks; ++r) product *= mpi_bench_value(p, r, g);
      return product;
    default:
      best = mpi_bench_value(p, 0, g);
      for (r = 1; r < p->nranks; ++r) {
        double v = mpi_bench_value(p, r, g);
        if (p->op == 2 ? v < best : v > best) best = v;
      }
      return best;
  }
}

static void put(void* buf, const dtype_info* d, size_t i, double v) {
  if (d->type == MPI_FLOAT)
    ((float*)buf)[i] = (float)v;
  else if (d->type == MPI_DOUBLE)
    ((double*)buf)[i] = v;
  else if (d->type == MPI_INT32_T)
    ((int32_t*)buf)[i] = (int32_t)v;
  else
    ((int64_t*)buf)[i] = (int64_t)v;
}

static double get(const void* buf, const dtype_info* d, size_t i) {
  if (d->type == MPI_FLOAT) return ((const float*)buf)[i];
  if (d->type == MPI_DOUBLE) return ((const double*)buf)[i];
  if (d->type == MPI_INT32_T) return ((const int32_t*)buf)[i];
  return (double)((const int64_t*)buf)[i];
}

void* mpi_bench_alloc_touched(size_t bytes) {
  void* p;
  if (bytes == 0) bytes = 64;
  bytes = (bytes + 4095) & ~(size_t)4095;
  p = aligned_alloc(4096, bytes);
  if (!p) {
    fprintf(stderr, "mpi_allreduce_bench: cannot allocate %zu bytes\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  memset(p, 0, bytes); /* touch every page once, outside any timed region */
  return p;
}

int main(int argc, char** argv) {
  static const dtype_info dtypes[] = {
      {"float32", MPI_FLOAT, 4, 16777216.0},
      {"float64", MPI_DOUBLE, 8, 9007199254740992.0},
      {"int32", MPI_INT32_T, 4, 2147483647.0},
      {"int64", MPI_INT64_T, 8, 9007199254740992.0},
  };
  static const op_info ops[] = {
      {"sum", MPI_SUM}, {"prod", MPI_PROD}, {"min", MPI_MIN}, {"max", MPI_MAX}};
  uint64_t min_bytes = 8, max_bytes = 256ull << 20, iter_bytes = 1ull << 30, size;
  int factor = 2, warmup_max = 5, iters_max = 20, check = 1, inplace = 0, json = 0;
  const dtype_info* d = &dtypes[0];
  const op_info* op = &ops[0];
  int rank, nranks, i, rows = 0;
  uint64_t total_wrong = 0, prev_bytes = 0;
  double busbw_sum = 0, bus_factor, period_us = 0;
  char *sendbuf, *recvbuf;
  mpi_bench_pattern pattern = {0, 0, 1};

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (argc > 1 && !strcmp(argv[1], "fusion")) {
    int rc = mpi_fusion_main(argc - 1, argv + 1, rank, nranks);
    MPI_Finalize();
    return rc;
  }
  if (argc > 1 && !strcmp(argv[1], "overlap")) {
    int rc = mpi_overlap_main(argc - 1, argv + 1, rank, nranks);
    MPI_Finalize();
    return rc;
  }

  for (i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    int ok = 1;
    if (!strcmp(a, "-J") || !strcmp(a, "--json")) {
      json = 1;
      continue;
    }
    if (!v)
      ok = 0;
    else if (!strcmp(a, "-b") || !strcmp(a, "--minbytes"))
      ok = bench_parse_bytes(v, &min_bytes);
    else if (!strcmp(a, "-e") || !strcmp(a, "--maxbytes"))
      ok = bench_parse_bytes(v, &max_bytes);
    else if (!strcmp(a, "--iter-bytes"))
      ok = bench_parse_bytes(v, &iter_bytes);
    else if (!strcmp(a, "-f") || !strcmp(a, "--stepfactor"))
      ok = (factor = atoi(v)) >= 2;
    else if (!strcmp(a, "-w") || !strcmp(a, "--warmup_iters"))
      ok = (warmup_max = atoi(v)) >= 0;
    else if (!strcmp(a, "-n") || !strcmp(a, "--iters"))
      ok = (iters_max = atoi(v)) >= 1;
    else if (!strcmp(a, "--period-us"))
      ok = (period_us = atof(v)) >= 0;
    else if (!strcmp(a, "-c") || !strcmp(a, "--check"))
      ok = (check = atoi(v)) == 0 || check == 1;
    else if (!strcmp(a, "-i") || !strcmp(a, "--inplace"))
      ok = (inplace = atoi(v)) == 0 || inplace == 1;
    else if (!strcmp(a, "-d") || !strcmp(a, "--datatype")) {
      size_t k;
      ok = 0;
      if (!strcmp(v, "float") || !strcmp(v, "f32")) v = "float32";
      if (!strcmp(v, "double") || !strcmp(v, "f64")) v = "float64";
      for (k = 0; k < sizeof dtypes / sizeof dtypes[0]; ++k)
        if (!strcmp(v, dtypes[k].name)) d = &dtypes[k], ok = 1;
    } else if (!strcmp(a, "-o") || !strcmp(a, "--op")) {
      size_t k;
      ok = 0;
      for (k = 0; k < sizeof ops / sizeof ops[0]; ++k)
        if (!strcmp(v, ops[k].name)) op = &ops[k], pattern.op = (int)k, ok = 1;
    } else
      ok = 0;
    if (!ok || min_bytes == 0 || min_bytes > max_bytes) {
      if (rank == 0) {
        fprintf(stderr, "mpi_allreduce_bench: bad argument '%s%s%s'\n", a, v ? " " : "",
                v ? v : "");
        usage();
      }
      MPI_Finalize();
      return 2;
    }
    ++i;
  }

  pattern.nranks = nranks;
  if (check) {
    double n = nranks, period;
    if (pattern.op == 1)
      period = 3;
    else if (pattern.op == 2 || pattern.op == 3)
      period = d->limit + 1;
    else
      period = (double)(uint64_t)(d->limit / n) - n + 2;
    if (period > (1 << 20)) period = 1 << 20;
    if (period < 2) {
      if (rank == 0) fprintf(stderr, "mpi_allreduce_bench: cannot check %s exactly\n", d->name);
      MPI_Finalize();
      return 2;
    }
    pattern.period = (uint64_t)period;
  }

  {
    uint64_t maxcount = max_bytes / d->size ? max_bytes / d->size : 1;
    recvbuf = mpi_bench_alloc_touched(maxcount * d->size);
    sendbuf = mpi_bench_alloc_touched(inplace ? 0 : maxcount * d->size);
  }
  bus_factor = 2.0 * (nranks - 1) / nranks;

  if (rank == 0 && !json) {
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    char* nl;
    MPI_Get_library_version(ver, &len);
    if ((nl = strchr(ver, '\n'))) *nl = '\0';
    if ((nl = strchr(ver, ','))) *nl = '\0';
    printf("# mpi_allreduce_bench: nranks %d, minBytes %" PRIu64 " maxBytes %" PRIu64
           " step: %d(factor) warmup iters: %d iters: %d (at most %" PRIu64
           " bytes per size) check: %d\n",
           nranks, min_bytes, max_bytes, factor, warmup_max, iters_max, iter_bytes, check);
    printf("# dtype %s, op %s, inplace %d, %s\n", d->name, op->name, inplace, ver);
    if (period_us > 0)
      printf(
          "# --period-us %g: a timed op every %g us at most (at multiples of it); time is the ops' "
          "own\n",
          period_us, period_us);
    printf("#\n");
    printf("# %10s  %12s  %8s  %6s  %6s  %10s  %7s  %7s  %7s\n", "size", "count", "type", "redop",
           "algo", "time", "algbw", "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %10s  %7s  %7s  %7s\n", "(B)", "(elements)", "", "", "",
           "(us)", "(GB/s)", "(GB/s)", "");
    fflush(stdout);
  }

  for (size = min_bytes; size <= max_bytes;) {
    size_t count = size / d->size ? size / d->size : 1, k;
    uint64_t bytes = (uint64_t)count * d->size, wrong = 0;
    int iters = bench_iters_for(bytes, iter_bytes, iters_max);
    int warmup = bench_warmup_for(bytes, iter_bytes, warmup_max);
    const void* send = inplace ? MPI_IN_PLACE : (const void*)sendbuf;
    double t0, avg_us, algbw, busbw;

    if (bytes != prev_bytes) {
      prev_bytes = bytes;
      for (k = 0; k < count; ++k) {
        put(recvbuf, d, k, (double)((k + rank) & 1));
        if (!inplace) put(sendbuf, d, k, (double)((k + rank) & 1));
      }
      MPI_Barrier(MPI_COMM_WORLD);
      for (i = 0; i < warmup; ++i)
        MPI_Allreduce(send, recvbuf, (int)count, d->type, op->op, MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
      if (period_us > 0) { /* each op timed alone, the sleeps between them not */
        double op_seconds = 0, start_s;
        for (i = 0; i < iters; ++i) {
          bench_sleep_to_next_period(period_us);
          start_s = bench_monotonic_s();
          MPI_Allreduce(send, recvbuf, (int)count, d->type, op->op, MPI_COMM_WORLD);
          op_seconds += bench_monotonic_s() - start_s;
        }
        avg_us = op_seconds * 1e6 / iters;
      } else {
        t0 = MPI_Wtime();
        for (i = 0; i < iters; ++i)
          MPI_Allreduce(send, recvbuf, (int)count, d->type, op->op, MPI_COMM_WORLD);
        avg_us = (MPI_Wtime() - t0) * 1e6 / iters;
      }
      MPI_Allreduce(MPI_IN_PLACE, &avg_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

      if (check) {
        void* in = inplace ? recvbuf : sendbuf;
        memset(recvbuf, 0xff, count * d->size);
        for (k = 0; k < count; ++k) put(in, d, k, mpi_bench_value(&pattern, rank, k));
        MPI_Allreduce(send, recvbuf, (int)count, d->type, op->op, MPI_COMM_WORLD);
        for (k = 0; k < count; ++k) wrong += get(recvbuf, d, k) != mpi_bench_reduced(&pattern, k);
        MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        total_wrong += wrong;
      }
      algbw = (double)bytes / (avg_us * 1e-6) / 1e9;
      busbw = algbw * bus_factor;
      busbw_sum += busbw;
      ++rows;
      if (rank == 0) {
        char wrong_text[32];
        if (check)
          snprintf(wrong_text, sizeof wrong_text, "%" PRIu64, wrong);
        else
          snprintf(wrong_text, sizeof wrong_text, json ? "null" : "N/A");
        if (json)
          printf("{\"collective\": \"allreduce\", \"nranks\": %d, \"size\": %" PRIu64
                 ", \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"algo\": \"mpi\", "
                 "\"root\": -1, \"inplace\": %d, \"warmup\": %d, \"iters\": %d, \"time_us\": "
                 "%.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, \"wrong\": %s, "
                 "\"period_us\": %g}\n",
                 nranks, bytes, count, d->name, op->name, inplace, warmup, iters, avg_us, algbw,
                 busbw, wrong_text, period_us);
        else
          printf("  %10" PRIu64 "  %12zu  %8s  %6s  %6s  %10.2f  %7.3f  %7.3f  %7s\n", bytes, count,
                 d->name, op->name, "mpi", avg_us, algbw, busbw, wrong_text);
        fflush(stdout);
      }
    }
    if (size > max_bytes / (uint64_t)factor) break;
    size *= (uint64_t)factor;
  }

  if (rank == 0) {
    double avg = rows ? busbw_sum / rows : 0.0;
    if (json) {
      if (check)
        printf(
            "{\"summary\": true, \"collective\": \"allreduce\", \"nranks\": %d, \"wrong\": "
            "%" PRIu64 ", \"avg_busbw_gbps\": %.6f}\n",
            nranks, total_wrong, avg);
      else
        printf(
            "{\"summary\": true, \"collective\": \"allreduce\", \"nranks\": %d, \"wrong\": "
            "null, \"avg_busbw_gbps\": %.6f}\n",
            nranks, avg);
    } else {
      printf("# Out of bounds values : %" PRIu64 " %s\n", total_wrong,
             !check        ? "(not checked)"
             : total_wrong ? "FAILED"
                           : "OK");
      printf("# Avg bus bandwidth    : %g\n#\n", avg);
    }
    fflush(stdout);
  }
  free(sendbuf);
  free(recvbuf);
  MPI_Finalize();
  return total_wrong == 0 ? 0 : 1;
}
