/* Helpers shared by chorus-bench (C++) and the Open MPI comparison bench (C),
 * so both read sizes and choose iteration counts the same way. */
#ifndef CHORUS_BENCH_COMMON_H
#define CHORUS_BENCH_COMMON_H

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>

/* "8", "64K", "256M", "1G", "1GiB", "4kb": binary multiples (K = 1024), as
 * nccl-tests. Returns 1 on success, 0 on a malformed or overflowing value. */
static inline int bench_parse_bytes(const char* text, uint64_t* out) {
  char* end = NULL;
  if (!text || !isdigit((unsigned char)*text)) return 0;
  unsigned long long v = strtoull(text, &end, 10);
  unsigned shift = 0;
  switch (toupper((unsigned char)*end)) {
    case 'K':
      shift = 10;
      ++end;
      break;
    case 'M':
      shift = 20;
      ++end;
      break;
    case 'G':
      shift = 30;
      ++end;
      break;
    case 'T':
      shift = 40;
      ++end;
      break;
    default:
      break;
  }
  if (shift && toupper((unsigned char)*end) == 'I') ++end;
  if (toupper((unsigned char)*end) == 'B') ++end;
  if (*end != '\0') return 0;
  if (shift && v > (UINT64_MAX >> shift)) return 0;
  *out = (uint64_t)v << shift;
  return 1;
}

/* The iteration rule: at most `iter_bytes` timed bytes per size, at least one
 * op: iters = clamp(ceil(iter_bytes / size), 1, max_iters). Warm-up uses a
 * quarter of the budget: clamp(ceil(iter_bytes / 4 / size), 1, max_warmup),
 * or 0 when max_warmup is 0. */
static inline int bench_iters_for(uint64_t size, uint64_t iter_bytes, int max_iters) {
  uint64_t cap;
  if (size == 0) size = 1;
  cap = (iter_bytes + size - 1) / size;
  if (cap < 1) cap = 1;
  if (cap > (uint64_t)max_iters) cap = (uint64_t)max_iters;
  return (int)cap;
}

static inline int bench_warmup_for(uint64_t size, uint64_t iter_bytes, int max_warmup) {
  if (max_warmup <= 0) return 0;
  return bench_iters_for(size, iter_bytes / 4, max_warmup);
}

static inline int bench_cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts v). */
static inline double bench_median_sorting(double* v, int n) {
  if (n <= 0) return 0;
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif /* CHORUS_BENCH_COMMON_H */
