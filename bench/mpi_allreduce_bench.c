/* mpi_allreduce_bench: MPI_Allreduce timed exactly as chorus-bench times
 * chorus_allreduce, with the same flags, iteration rule, columns and JSON, so
 * bench/compare.py can put the two side by side.
 *
 *   mpirun -np 2 --mca btl tcp,self mpi_allreduce_bench -b 8 -e 256M -f 2
 *   mpirun -np 2 --mca btl tcp,self mpi_allreduce_bench fusion -N 1000 -b 4K
 *   mpirun -np 2 --mca btl tcp,self mpi_allreduce_bench fusion --mix resnet50
 *
 * The second and third form are the Open MPI side of the tensor-fusion
 * benchmark (fusion_main below, docs/benchmarks.md "Tensor fusion").
 *
 * For each size: MPI_Barrier, warm-up ops, MPI_Barrier, `iters` back-to-back
 * timed ops; the time is the maximum over ranks of the per-rank average
 * (MPI_MAX after the timed region). With -c 1 one more op on fresh data is
 * checked element by element against the closed-form result (the same data
 * pattern as chorus-bench). Only rank 0 prints. */
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "fusion_mixes.h"

int mpi_overlap_main(int argc, char** argv, int rank, int nranks); /* mpi_overlap.c */

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
          "         [--iter-bytes B] [-c 0|1] [-d float32|float64|int32|int64] "
          "[-o sum|prod|min|max]\n"
          "         [-i|--inplace 0|1] [-J|--json]\n"
          "       mpi_allreduce_bench fusion --help   (the tensor-fusion benchmark)\n"
          "       mpi_allreduce_bench overlap --help  (allreduce behind computation)\n");
}

static uint64_t g_period;
static int g_nranks;
static int g_op; /* 0 sum, 1 prod, 2 min, 3 max */

/* The pattern of chorus-bench (bench/chorus_bench.cpp, Pattern). */
static double value_of(int r, uint64_t g) {
  if (g_op == 1) return (g + (uint64_t)r) % 3 == 0 ? 2.0 : 1.0;
  if (g_op == 2 || g_op == 3) return (double)((g + 7ull * (uint64_t)r) % g_period);
  return (double)(g % g_period) + 2.0 * r;
}

static double reduced_of(uint64_t g) {
  double n = g_nranks, best, p;
  int r;
  switch (g_op) {
    case 0:
      return n * (double)(g % g_period) + n * (n - 1);
    case 1:
      p = 1;
      for (r = 0; r < g_nranks; ++r) p *= value_of(r, g);
      return p;
    default:
      best = value_of(0, g);
      for (r = 1; r < g_nranks; ++r) {
        double v = value_of(r, g);
        if (g_op == 2 ? v < best : v > best) best = v;
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

static void* alloc_touched(size_t bytes) {
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

/* ---------------------------------------------------------------- fusion
 * The Open MPI side of the tensor-fusion benchmark (chorus-bench fusion is the
 * Chorus side; docs/benchmarks.md, "Tensor fusion", holds the JSON contract
 * both follow). One "step" reduces every gradient tensor of a training step
 * once (float32 sum, in place, as frameworks reduce gradients):
 *   per_tensor     one blocking MPI_Allreduce per tensor, in gradient order;
 *   single_buffer  one MPI_Allreduce of one buffer of the same total size
 *                  (the bound a fusion engine aims for, without its copies).
 * Tensors are -N tensors of -b bytes each, or a named mix (--mix resnet50:
 * every parameter tensor of ResNet-50, bench/fusion_mixes.h). Each tensor
 * has its own 64-byte aligned place in one arena; the single buffer is a
 * separate allocation. Timing per mode: barrier, warm-up steps, barrier, then
 * `iters` back-to-back steps, each timed on its own; a rank's figure is the
 * median of its step times, and the row shows the maximum over ranks
 * (MPI_MAX). iters and warm-up follow the iteration rule of the sweep
 * (bench_common.h) applied to the bytes of one step. The timed data is zeros
 * (sums in place stay finite). With -c 1 one more step per mode runs on fresh
 * integer-valued data and every element of every tensor is compared with the
 * closed-form sum. */

enum { FUSION_PER_TENSOR = 1, FUSION_SINGLE_BUFFER = 2 };

static void fusion_usage(void) {
  fprintf(stderr,
          "usage: mpi_allreduce_bench fusion [-N TENSORS] [-b BYTES_EACH] | [--mix NAME]\n"
          "         [-m|--modes per_tensor,single_buffer] [-w WARMUP] [-n ITERS] "
          "[--iter-bytes B]\n"
          "         [-c 0|1] [-J|--json]\n"
          "       defaults: -N 1000 -b 4K -m per_tensor,single_buffer -w 5 -n 20 "
          "--iter-bytes 1G -c 1\n"
          "       mixes:");
  chorus_bench_print_mixes(stderr);
  fprintf(stderr, "\n");
}

typedef struct {
  size_t tensors;
  const size_t* elems; /* elements of each tensor, gradient order */
  size_t* offset;      /* each tensor's place in the arena (elements) */
  size_t total;        /* elements per step */
  float* arena;        /* per_tensor: every tensor, 64-byte aligned */
  size_t arena_elems;
  float* single; /* single_buffer: `total` elements */
} fusion_set;

/* One training step's reduction in `mode`. */
static void fusion_step(const fusion_set* f, int mode) {
  size_t t;
  if (mode == FUSION_SINGLE_BUFFER) {
    MPI_Allreduce(MPI_IN_PLACE, f->single, (int)f->total, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return;
  }
  for (t = 0; t < f->tensors; ++t)
    MPI_Allreduce(MPI_IN_PLACE, f->arena + f->offset[t], (int)f->elems[t], MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
}

/* Writes the check's input (sum pattern over the step's global element index
 * g: (g mod period) + 2 rank) into the mode's buffers. */
static void fusion_fill(const fusion_set* f, int mode, int rank) {
  size_t t, k, g = 0;
  for (t = 0; t < f->tensors; ++t) {
    float* p = mode == FUSION_SINGLE_BUFFER ? f->single + g : f->arena + f->offset[t];
    for (k = 0; k < f->elems[t]; ++k, ++g) p[k] = (float)value_of(rank, g);
  }
}

/* Elements of the mode's buffers that differ from the closed-form sum. */
static uint64_t fusion_wrong(const fusion_set* f, int mode) {
  size_t t, k, g = 0;
  uint64_t wrong = 0;
  for (t = 0; t < f->tensors; ++t) {
    const float* p = mode == FUSION_SINGLE_BUFFER ? f->single + g : f->arena + f->offset[t];
    for (k = 0; k < f->elems[t]; ++k, ++g) wrong += (double)p[k] != reduced_of(g);
  }
  return wrong;
}

static int fusion_main(int argc, char** argv, int rank, int nranks) {
  static const struct {
    const char* name;
    int bit;
  } mode_names[] = {{"per_tensor", FUSION_PER_TENSOR}, {"single_buffer", FUSION_SINGLE_BUFFER}};
  uint64_t bytes_each = 4096, iter_bytes = 1ull << 30, wrong_total = 0, step_bytes;
  long tensors_opt = 1000;
  const chorus_bench_mix* mix = NULL;
  int modes = FUSION_PER_TENSOR | FUSION_SINGLE_BUFFER, warmup_max = 5, iters_max = 20;
  int check = 1, json = 0, shape_given = 0, iters, warmup, i, m;
  size_t t, each = 0;
  size_t* uniform = NULL;
  fusion_set f;
  double* times;

  memset(&f, 0, sizeof f);
  for (i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    int ok = 1;
    if (!strcmp(a, "-J") || !strcmp(a, "--json")) {
      json = 1;
      continue;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      if (rank == 0) fusion_usage();
      return 0;
    }
    if (!v)
      ok = 0;
    else if (!strcmp(a, "-N") || !strcmp(a, "--tensors")) {
      char* end = NULL;
      tensors_opt = strtol(v, &end, 10);
      ok = *v && !*end && tensors_opt >= 1 && tensors_opt <= (1L << 24);
      shape_given = 1;
    } else if (!strcmp(a, "-b") || !strcmp(a, "--bytes-each")) {
      ok = bench_parse_bytes(v, &bytes_each) && bytes_each >= 4;
      shape_given = 1;
    } else if (!strcmp(a, "--mix"))
      ok = (mix = chorus_bench_find_mix(v)) != NULL;
    else if (!strcmp(a, "-m") || !strcmp(a, "--modes")) {
      /* A comma-separated list of mode names. */
      const char* p = v;
      modes = 0;
      while (ok && *p) {
        size_t len = strcspn(p, ","), k;
        int bit = 0;
        for (k = 0; k < sizeof mode_names / sizeof mode_names[0]; ++k)
          if (strlen(mode_names[k].name) == len && !strncmp(p, mode_names[k].name, len))
            bit = mode_names[k].bit;
        ok = bit != 0;
        modes |= bit;
        p += len + (p[len] == ',');
      }
      ok = ok && modes != 0;
    } else if (!strcmp(a, "--iter-bytes"))
      ok = bench_parse_bytes(v, &iter_bytes);
    else if (!strcmp(a, "-w") || !strcmp(a, "--warmup_iters"))
      ok = (warmup_max = atoi(v)) >= 0;
    else if (!strcmp(a, "-n") || !strcmp(a, "--iters"))
      ok = (iters_max = atoi(v)) >= 1;
    else if (!strcmp(a, "-c") || !strcmp(a, "--check"))
      ok = (check = atoi(v)) == 0 || check == 1;
    else
      ok = 0;
    if (!ok || (mix && shape_given)) {
      if (rank == 0) {
        if (ok)
          fprintf(stderr, "mpi_allreduce_bench fusion: --mix and -N/-b exclude each other\n");
        else
          fprintf(stderr, "mpi_allreduce_bench fusion: bad argument '%s%s%s'\n", a, v ? " " : "",
                  v ? v : "");
        fusion_usage();
      }
      return 2;
    }
    ++i;
  }

  if (mix) {
    f.tensors = mix->count;
    f.elems = mix->elems;
  } else {
    each = (size_t)(bytes_each / 4);
    f.tensors = (size_t)tensors_opt;
    uniform = malloc(f.tensors * sizeof *uniform);
    if (!uniform) MPI_Abort(MPI_COMM_WORLD, 2);
    for (t = 0; t < f.tensors; ++t) uniform[t] = each;
    f.elems = uniform;
  }
  f.offset = malloc(f.tensors * sizeof *f.offset);
  if (!f.offset) MPI_Abort(MPI_COMM_WORLD, 2);
  for (t = 0; t < f.tensors; ++t) {
    f.offset[t] = f.arena_elems;
    f.total += f.elems[t];
    f.arena_elems += (f.elems[t] + 15) & ~(size_t)15; /* 64-byte aligned places */
  }
  if (f.total > 2147483647u) {
    if (rank == 0)
      fprintf(stderr, "mpi_allreduce_bench fusion: %zu elements per step exceed MPI's int count\n",
              f.total);
    free(uniform);
    free(f.offset);
    return 2;
  }
  step_bytes = (uint64_t)f.total * 4;

  g_nranks = nranks;
  g_op = 0;
  if (check) {
    /* As the sweep's check for float32 sums: every partial sum an exact integer. */
    double period = (double)(uint64_t)(16777216.0 / nranks) - nranks + 2;
    if (period > (1 << 20)) period = 1 << 20;
    if (period < 2) {
      if (rank == 0)
        fprintf(stderr, "mpi_allreduce_bench fusion: cannot check float32 sums exactly\n");
      free(uniform);
      free(f.offset);
      return 2;
    }
    g_period = (uint64_t)period;
  }
  iters = bench_iters_for(step_bytes, iter_bytes, iters_max);
  warmup = bench_warmup_for(step_bytes, iter_bytes, warmup_max);
  if (modes & FUSION_PER_TENSOR) f.arena = alloc_touched(f.arena_elems * 4);
  if (modes & FUSION_SINGLE_BUFFER) f.single = alloc_touched(f.total * 4);
  times = malloc((size_t)iters * sizeof *times);
  if (!times) MPI_Abort(MPI_COMM_WORLD, 2);

  if (rank == 0 && !json) {
    printf("# mpi_allreduce_bench fusion: nranks %d, %zu tensors (%s), %" PRIu64
           " bytes per step, float32 sum in place\n",
           nranks, f.tensors, mix ? mix->name : "uniform", step_bytes);
    printf("# warmup steps: %d, timed steps: %d (at most %" PRIu64
           " bytes per mode), check: %d; step = median per rank, max over ranks\n#\n",
           warmup, iters, iter_bytes, check);
    printf("# %13s  %8s  %12s  %11s  %11s  %11s  %7s  %7s\n", "mode", "tensors", "bytes", "step",
           "mean", "min", "busbw", "#wrong");
    printf("# %13s  %8s  %12s  %11s  %11s  %11s  %7s  %7s\n", "", "", "(per step)", "(us)", "(us)",
           "(us)", "(GB/s)", "");
    fflush(stdout);
  }

  for (m = 0; m < (int)(sizeof mode_names / sizeof mode_names[0]); ++m) {
    const int mode = mode_names[m].bit;
    double stats[3], sum = 0, busbw;
    uint64_t wrong = 0;
    if (!(modes & mode)) continue;
    /* The timed data: zeros (an earlier mode's check may have left values). */
    if (mode == FUSION_PER_TENSOR)
      memset(f.arena, 0, f.arena_elems * 4);
    else
      memset(f.single, 0, f.total * 4);
    MPI_Barrier(MPI_COMM_WORLD);
    for (i = 0; i < warmup; ++i) fusion_step(&f, mode);
    MPI_Barrier(MPI_COMM_WORLD);
    for (i = 0; i < iters; ++i) {
      double t0 = MPI_Wtime();
      fusion_step(&f, mode);
      times[i] = (MPI_Wtime() - t0) * 1e6;
      sum += times[i];
    }
    stats[1] = sum / iters;
    stats[0] = bench_median_sorting(times, iters); /* sorts: times[0] is the minimum */
    stats[2] = times[0];
    MPI_Allreduce(MPI_IN_PLACE, stats, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    if (check) {
      fusion_fill(&f, mode, rank);
      fusion_step(&f, mode);
      wrong = fusion_wrong(&f, mode);
      MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
      wrong_total += wrong;
    }
    busbw = (double)step_bytes / (stats[0] * 1e-6) / 1e9 * (2.0 * (nranks - 1) / nranks);
    if (rank == 0) {
      char wrong_text[32], each_text[32], mix_text[64];
      if (check)
        snprintf(wrong_text, sizeof wrong_text, "%" PRIu64, wrong);
      else
        snprintf(wrong_text, sizeof wrong_text, json ? "null" : "N/A");
      if (json) {
        if (mix)
          snprintf(each_text, sizeof each_text, "null");
        else
          snprintf(each_text, sizeof each_text, "%zu", each * 4);
        if (mix)
          snprintf(mix_text, sizeof mix_text, "\"%s\"", mix->name);
        else
          snprintf(mix_text, sizeof mix_text, "null");
        printf(
            "{\"impl\": \"ompi\", \"benchmark\": \"fusion\", \"mode\": \"%s\", \"tensors\": %zu, "
            "\"bytes\": %" PRIu64
            ", \"bytes_each\": %s, \"mix\": %s, \"np\": %d, \"type\": \"float32\", "
            "\"redop\": \"sum\", \"inplace\": 1, \"warmup\": %d, \"iters\": %d, \"step_us\": "
            "%.3f, \"mean_us\": %.3f, \"min_us\": %.3f, \"busbw_gbps\": %.6f, \"wrong\": %s}\n",
            mode_names[m].name, f.tensors, step_bytes, each_text, mix_text, nranks, warmup, iters,
            stats[0], stats[1], stats[2], busbw, wrong_text);
      } else
        printf("  %13s  %8zu  %12" PRIu64 "  %11.1f  %11.1f  %11.1f  %7.3f  %7s\n",
               mode_names[m].name, f.tensors, step_bytes, stats[0], stats[1], stats[2], busbw,
               wrong_text);
      fflush(stdout);
    }
  }

  if (rank == 0) {
    if (json) {
      char wrong_text[32];
      if (check)
        snprintf(wrong_text, sizeof wrong_text, "%" PRIu64, wrong_total);
      else
        snprintf(wrong_text, sizeof wrong_text, "null");
      printf(
          "{\"summary\": true, \"impl\": \"ompi\", \"benchmark\": \"fusion\", \"np\": %d, "
          "\"wrong\": %s}\n",
          nranks, wrong_text);
    } else
      printf("# Out of bounds values : %" PRIu64 " %s\n#\n", wrong_total,
             !check        ? "(not checked)"
             : wrong_total ? "FAILED"
                           : "OK");
    fflush(stdout);
  }
  free(times);
  free(f.arena);
  free(f.single);
  free(f.offset);
  free(uniform);
  return wrong_total == 0 ? 0 : 1;
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
  double busbw_sum = 0, bus_factor;
  char *sendbuf, *recvbuf;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (argc > 1 && !strcmp(argv[1], "fusion")) {
    int rc = fusion_main(argc - 1, argv + 1, rank, nranks);
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
        if (!strcmp(v, ops[k].name)) op = &ops[k], g_op = (int)k, ok = 1;
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

  g_nranks = nranks;
  if (check) {
    double n = nranks, period;
    if (g_op == 1)
      period = 3;
    else if (g_op == 2 || g_op == 3)
      period = d->limit + 1;
    else
      period = (double)(uint64_t)(d->limit / n) - n + 2;
    if (period > (1 << 20)) period = 1 << 20;
    if (period < 2) {
      if (rank == 0) fprintf(stderr, "mpi_allreduce_bench: cannot check %s exactly\n", d->name);
      MPI_Finalize();
      return 2;
    }
    g_period = (uint64_t)period;
  }

  {
    uint64_t maxcount = max_bytes / d->size ? max_bytes / d->size : 1;
    recvbuf = alloc_touched(maxcount * d->size);
    sendbuf = alloc_touched(inplace ? 0 : maxcount * d->size);
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
    printf("# dtype %s, op %s, inplace %d, %s\n#\n", d->name, op->name, inplace, ver);
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
      t0 = MPI_Wtime();
      for (i = 0; i < iters; ++i)
        MPI_Allreduce(send, recvbuf, (int)count, d->type, op->op, MPI_COMM_WORLD);
      avg_us = (MPI_Wtime() - t0) * 1e6 / iters;
      MPI_Allreduce(MPI_IN_PLACE, &avg_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

      if (check) {
        void* in = inplace ? recvbuf : sendbuf;
        memset(recvbuf, 0xff, count * d->size);
        for (k = 0; k < count; ++k) put(in, d, k, value_of(rank, k));
        MPI_Allreduce(send, recvbuf, (int)count, d->type, op->op, MPI_COMM_WORLD);
        for (k = 0; k < count; ++k) wrong += get(recvbuf, d, k) != reduced_of(k);
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
                 "%.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, \"wrong\": %s}\n",
                 nranks, bytes, count, d->name, op->name, inplace, warmup, iters, avg_us, algbw,
                 busbw, wrong_text);
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
