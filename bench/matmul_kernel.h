/* One float32 matrix product, C += A * B (n x n, row-major): the compute
 * kernel of chorus-load's matmul load and of the overlap benchmarks, a
 * stand-in for backpropagation; 2 n^3 flop. The i-k-j order lets the inner
 * loop vectorise. Plain C, for the C++ benches and the Open MPI one alike. */
#ifndef CHORUS_BENCH_MATMUL_KERNEL_H
#define CHORUS_BENCH_MATMUL_KERNEL_H

#include <stddef.h>

static inline void bench_matmul(const float* a, const float* b, float* c, size_t n) {
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < n; ++k) {
      const float aik = a[i * n + k];
      const float* brow = b + k * n;
      float* crow = c + i * n;
      for (size_t j = 0; j < n; ++j) crow[j] += aik * brow[j];
    }
}

/* The inputs every user of the kernel multiplies: small exact values. */
static inline void bench_matmul_fill(float* a, float* b, size_t n) {
  for (size_t i = 0; i < n * n; ++i) {
    a[i] = (float)(i % 7) * 0.25f;
    b[i] = (float)(i % 5) * 0.125f;
  }
}

#endif /* CHORUS_BENCH_MATMUL_KERNEL_H */
