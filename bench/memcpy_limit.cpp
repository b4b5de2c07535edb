// Single-thread memcpy bandwidth per size (see memcpy_limit.hpp): the
// limit(GB/s) column of chorus-bench, measured by rank 0 before the sweep so
// that busbw can be read as a fraction of what one core copies locally.
#include "memcpy_limit.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace chorus_bench {

void* alloc_touched(size_t bytes) {
  if (bytes == 0) bytes = 64;
  bytes = (bytes + 4095) & ~static_cast<size_t>(4095);
  void* p = std::aligned_alloc(4096, bytes);
  if (!p) {
    std::fprintf(stderr, "chorus-bench: cannot allocate %zu bytes\n", bytes);
    std::exit(2);
  }
  std::memset(p, 0, bytes);  // touch every page once, outside any timed region
  return p;
}

void pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

// ------------------------------------------------------------- memcpy limit
//
// The reference of the limit(GB/s) and %limit columns: single-thread memcpy
// bandwidth at each size of the sweep, bytes / (time of one memcpy of that many
// bytes), the median of several samples. Source and destination are distinct,
// page-aligned buffers of the largest size, allocated and touched first. A
// sample times `copies` back-to-back copies (doubled from 1 until a sample
// lasts kLimitMinSample, so the clock's cost and resolution vanish at small
// sizes) and divides by `copies`; the calibration doubles as warm-up. Each size
// takes about kLimitSizeBudget (at least kLimitMinSamples samples); once
// kLimitTotalBudget has passed the remaining sizes take one sample each.

namespace {

constexpr double kLimitMinSample = 100e-6;  // seconds per sample, at least
constexpr double kLimitSizeBudget = 30e-3;  // seconds of samples per size
constexpr double kLimitTotalBudget = 2.0;   // seconds for the whole table
constexpr int kLimitMinSamples = 5, kLimitMaxSamples = 11;

// Tells the compiler the copy's result is used, so no copy is dropped or merged.
inline void keep(void* p) {
  asm volatile("" : : "r"(p) : "memory");
}

double time_copies(void* dst, const void* src, size_t bytes, int64_t copies) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < copies; ++i) {
    std::memcpy(dst, src, bytes);
    keep(dst);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<double> measure_memcpy(const std::vector<uint64_t>& sizes, double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const uint64_t largest = sizes.empty() ? 1 : *std::max_element(sizes.begin(), sizes.end());
  void* src = alloc_touched(largest);
  void* dst = alloc_touched(largest);
  std::vector<double> gbps;
  std::vector<double> samples;
  for (const uint64_t size : sizes) {
    const size_t bytes = static_cast<size_t>(size);
    int64_t copies = 1;
    double t = time_copies(dst, src, bytes, copies);
    while (t < kLimitMinSample && copies < (int64_t{1} << 30)) {
      copies *= 2;
      t = time_copies(dst, src, bytes, copies);
    }
    int n = static_cast<int>(std::clamp(kLimitSizeBudget / std::max(t, 1e-9),
                                        static_cast<double>(kLimitMinSamples),
                                        static_cast<double>(kLimitMaxSamples)));
    if (elapsed() > kLimitTotalBudget) n = 1;
    samples.clear();
    for (int i = 0; i < n; ++i)
      samples.push_back(time_copies(dst, src, bytes, copies) / static_cast<double>(copies));
    std::sort(samples.begin(), samples.end());
    const double median =
        samples.size() % 2 ? samples[samples.size() / 2]
                           : 0.5 * (samples[samples.size() / 2 - 1] + samples[samples.size() / 2]);
    gbps.push_back(static_cast<double>(size) / median / 1e9);
  }
  std::free(src);
  std::free(dst);
  *seconds = elapsed();
  return gbps;
}

}  // namespace chorus_bench
