/* mpi_allreduce_bench overlap: the Open MPI side of chorus-bench overlap
 * (bench/overlap_bench.cpp says what is measured and how it is read):
 * MPI_Iallreduce, the same float32 matrix products (bench/matmul_kernel.h),
 * MPI_Wait. Open MPI moves a non-blocking call only inside MPI calls (no
 * progress thread in this build's defaults), so the products run without
 * it: what overlap is left is what the first MPI_Iallreduce call and the
 * kernel's socket buffers do on their own. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "matmul_kernel.h"
#include "mpi_bench.h"
#include "overlap_ceiling.h"

typedef struct {
  size_t side;
  float *a, *b, *c;
  int sleep; /* -k sleep: products are microseconds asleep */
} compute_t;

static void compute_run(compute_t* k, long products) {
  long p;
  if (k->sleep) {
    struct timespec ts;
    ts.tv_sec = products / 1000000;
    ts.tv_nsec = (products % 1000000) * 1000;
    nanosleep(&ts, NULL);
    return;
  }
  for (p = 0; p < products; ++p) {
    bench_matmul(k->a, k->b, k->c, k->side);
    k->c[(size_t)p % (k->side * k->side)] *= 0.5f; /* keeps C bounded */
  }
}

static double max_over_ranks(double v) {
  double out = v;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

static double now_us(void) {
  return MPI_Wtime() * 1e6;
}

static void overlap_usage(void) {
  fprintf(stderr,
          "usage: mpi_allreduce_bench overlap [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS] "
          "[-w WARMUP]\n"
          "         [--compute-us US] [--size SIDE] [-k matmul|sleep] [-J|--json]\n");
}

int mpi_overlap_main(int argc, char** argv, int rank, int nranks) {
  uint64_t min_bytes = 64 << 10, max_bytes = 64 << 20, total_wrong = 0, bytes;
  int factor = 4, iters = 10, warmup = 2, json = 0, side = 64, i, r;
  double compute_us = 0, per_product, product_us[21];
  const double cores = bench_cores_per_rank(nranks);
  compute_t k;
  k.sleep = 0;
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
    else if (!strcmp(a, "-b"))
      ok = bench_parse_bytes(v, &min_bytes);
    else if (!strcmp(a, "-e"))
      ok = bench_parse_bytes(v, &max_bytes);
    else if (!strcmp(a, "-f"))
      ok = (factor = atoi(v)) >= 2;
    else if (!strcmp(a, "-n"))
      ok = (iters = atoi(v)) >= 1;
    else if (!strcmp(a, "-w"))
      ok = (warmup = atoi(v)) >= 0;
    else if (!strcmp(a, "--compute-us"))
      ok = (compute_us = atof(v)) >= 0;
    else if (!strcmp(a, "-k") || !strcmp(a, "--kind"))
      ok = (k.sleep = !strcmp(v, "sleep")) || !strcmp(v, "matmul");
    else if (!strcmp(a, "--size"))
      ok = (side = atoi(v)) >= 8 && side <= 2048;
    else
      ok = 0;
    if (!ok || min_bytes < 4 || max_bytes < min_bytes) {
      if (rank == 0) overlap_usage();
      return 2;
    }
    ++i;
  }
  k.side = (size_t)side;
  k.a = malloc(k.side * k.side * sizeof(float));
  k.b = malloc(k.side * k.side * sizeof(float));
  k.c = calloc(k.side * k.side, sizeof(float));
  /* Out of memory on one rank: abort the job, not leave the others waiting. */
  if (!k.a || !k.b || !k.c) MPI_Abort(MPI_COMM_WORLD, 2);
  bench_matmul_fill(k.a, k.b, k.side);
  per_product = 1; /* sleep: a "product" is a microsecond */
  if (!k.sleep) {
    compute_run(&k, 3);
    for (i = 0; i < 21; ++i) {
      double t0 = now_us();
      compute_run(&k, 1);
      product_us[i] = now_us() - t0;
    }
    per_product = max_over_ranks(bench_median_sorting(product_us, 21));
  }

  for (bytes = min_bytes; bytes <= max_bytes; bytes *= (uint64_t)factor) {
    size_t count = (size_t)(bytes / 4), e;
    float want = (float)nranks * (float)(nranks + 1) / 2;
    float* send = malloc(count * sizeof(float));
    float* recv = malloc(count * sizeof(float));
    double* comm_t = malloc((size_t)iters * sizeof(double));
    double* compute_t_ = malloc((size_t)iters * sizeof(double));
    double* step_t = malloc((size_t)iters * sizeof(double));
    double* inside_t = malloc((size_t)iters * sizeof(double));
    double* comm_cpu_t = malloc((size_t)iters * sizeof(double));
    double* compute_cpu_t = malloc((size_t)iters * sizeof(double));
    double comm_us, alone_us, step_us, inside_us, serial, ideal, overlap, stretch, target;
    double comm_cpu_us, compute_cpu_us, ceiling;
    long products;
    uint64_t wrong = 0, all_wrong = 0;
    if (!send || !recv || !comm_t || !compute_t_ || !step_t || !inside_t || !comm_cpu_t ||
        !compute_cpu_t)
      MPI_Abort(MPI_COMM_WORLD, 2);
    for (e = 0; e < count; ++e) send[e] = (float)(rank + 1);
    for (r = 0; r < warmup + iters; ++r) { /* comm alone */
      double t0, cpu0;
      MPI_Barrier(MPI_COMM_WORLD);
      cpu0 = bench_process_cpu_us();
      t0 = now_us();
      MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (r >= warmup) {
        comm_t[r - warmup] = now_us() - t0;
        comm_cpu_t[r - warmup] = bench_process_cpu_us() - cpu0;
      }
    }
    comm_us = max_over_ranks(bench_median_sorting(comm_t, iters));
    target = compute_us > 0 ? compute_us : comm_us;
    products = (long)(target / per_product + 0.5);
    if (products < 1) products = 1;
    for (r = 0; r < warmup + iters; ++r) { /* compute alone */
      double t0, cpu0;
      MPI_Barrier(MPI_COMM_WORLD);
      cpu0 = bench_process_cpu_us();
      t0 = now_us();
      compute_run(&k, products);
      if (r >= warmup) {
        compute_t_[r - warmup] = now_us() - t0;
        compute_cpu_t[r - warmup] = bench_process_cpu_us() - cpu0;
      }
    }
    for (r = 0; r < warmup + iters; ++r) { /* the step */
      MPI_Request request;
      double t0, c0, inside;
      memset(recv, 0, count * sizeof(float));
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = now_us();
      MPI_Iallreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
      c0 = now_us();
      compute_run(&k, products);
      inside = now_us() - c0;
      MPI_Wait(&request, MPI_STATUS_IGNORE);
      if (r >= warmup) {
        step_t[r - warmup] = now_us() - t0;
        inside_t[r - warmup] = inside;
      }
      for (e = 0; e < count; ++e) wrong += recv[e] != want;
    }
    MPI_Allreduce(&wrong, &all_wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    total_wrong += all_wrong;
    alone_us = max_over_ranks(bench_median_sorting(compute_t_, iters));
    step_us = max_over_ranks(bench_median_sorting(step_t, iters));
    inside_us = max_over_ranks(bench_median_sorting(inside_t, iters));
    serial = comm_us + alone_us;
    ideal = comm_us > alone_us ? comm_us : alone_us;
    overlap = serial > ideal ? (serial - step_us) / (serial - ideal) : 0;
    stretch = alone_us > 0 ? inside_us / alone_us : 0;
    comm_cpu_us = max_over_ranks(bench_median_sorting(comm_cpu_t, iters));
    compute_cpu_us = max_over_ranks(bench_median_sorting(compute_cpu_t, iters));
    ceiling = bench_overlap_ceiling(comm_us, alone_us, comm_cpu_us, compute_cpu_us, cores);
    if (rank == 0) {
      const char* kind = k.sleep ? "sleep" : "matmul";
      if (json)
        printf(
            "{\"impl\": \"ompi\", \"benchmark\": \"overlap\", \"kind\": \"%s\", \"np\": %d, "
            "\"size\": %llu, \"products\": %ld, \"comm_us\": %.3f, \"compute_us\": %.3f, "
            "\"step_us\": %.3f, \"serial_us\": %.3f, \"ideal_us\": %.3f, \"overlap\": %.4f, "
            "\"compute_stretch\": %.4f, \"comm_cpu_us\": %.3f, \"compute_cpu_us\": %.3f, "
            "\"cores_per_rank\": %.3f, \"overlap_ceiling\": %.4f, \"wrong\": %llu}\n",
            kind, nranks, (unsigned long long)bytes, products, comm_us, alone_us, step_us, serial,
            ideal, overlap, stretch, comm_cpu_us, compute_cpu_us, cores, ceiling,
            (unsigned long long)all_wrong);
      else
        printf(
            "%12llu B  comm %10.1f us  %s %10.1f us  step %10.1f us  serial %10.1f  ideal %10.1f  "
            "overlap %5.2f  ceiling %4.2f  comm cpu %10.1f us  compute x%.2f  wrong %llu\n",
            (unsigned long long)bytes, comm_us, kind, alone_us, step_us, serial, ideal, overlap,
            ceiling, comm_cpu_us, stretch, (unsigned long long)all_wrong);
      fflush(stdout);
    }
    free(send);
    free(recv);
    free(comm_t);
    free(compute_t_);
    free(step_t);
    free(inside_t);
    free(comm_cpu_t);
    free(compute_cpu_t);
  }
  if (rank == 0 && json)
    printf(
        "{\"summary\": true, \"impl\": \"ompi\", \"benchmark\": \"overlap\", \"np\": %d, "
        "\"wrong\": %llu}\n",
        nranks, (unsigned long long)total_wrong);
  free(k.a);
  free(k.b);
  free(k.c);
  return total_wrong ? 1 : 0;
}
