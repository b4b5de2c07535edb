/* mpi_allreduce_bench fusion: the Open MPI side of the tensor-fusion
 * benchmark (chorus-bench fusion is the Chorus side; docs/benchmarks.md,
 * "Tensor fusion", holds the JSON contract both follow). One "step" reduces
 * every gradient tensor of a training step once (float32 sum, in place, as
 * frameworks reduce gradients):
 *
 *   per_tensor     one blocking MPI_Allreduce per tensor, in gradient order;
 *   single_buffer  one MPI_Allreduce of one buffer of the same total size
 *                  (the bound a fusion engine aims for, without its copies).
 *
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
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "fusion_mixes.h"
#include "mpi_bench.h"

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
  float* single;             /* single_buffer: `total` elements */
  mpi_bench_pattern pattern; /* the check's data: float32 sums */
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
    for (k = 0; k < f->elems[t]; ++k, ++g) p[k] = (float)mpi_bench_value(&f->pattern, rank, g);
  }
}

/* Elements of the mode's buffers that differ from the closed-form sum. */
static uint64_t fusion_wrong(const fusion_set* f, int mode) {
  size_t t, k, g = 0;
  uint64_t wrong = 0;
  for (t = 0; t < f->tensors; ++t) {
    const float* p = mode == FUSION_SINGLE_BUFFER ? f->single + g : f->arena + f->offset[t];
    for (k = 0; k < f->elems[t]; ++k, ++g)
      wrong += (double)p[k] != mpi_bench_reduced(&f->pattern, g);
  }
  return wrong;
}

int mpi_fusion_main(int argc, char** argv, int rank, int nranks) {
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

  f.pattern.nranks = nranks;
  f.pattern.op = 0;
  f.pattern.period = 1;
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
    f.pattern.period = (uint64_t)period;
  }
  iters = bench_iters_for(step_bytes, iter_bytes, iters_max);
  warmup = bench_warmup_for(step_bytes, iter_bytes, warmup_max);
  if (modes & FUSION_PER_TENSOR) f.arena = mpi_bench_alloc_touched(f.arena_elems * 4);
  if (modes & FUSION_SINGLE_BUFFER) f.single = mpi_bench_alloc_touched(f.total * 4);
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
