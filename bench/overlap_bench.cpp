// chorus-bench overlap: a step like DDP's, the allreduce of one gradient
// bucket started and then hidden behind computation (docs/benchmarks.md,
// "Overlap with computation"; the Open MPI side: mpi_allreduce_bench overlap).
//
// Per size, float32 sum, every rank:
//   comm     a blocking allreduce alone
//   compute  K float32 matrix products (bench/matmul_kernel.h) alone, K
//            chosen so that they take about as long as comm (--compute-us
//            sets the time instead); or, with -k sleep, a sleep of that
//            long, standing in for a GPU kernel the host waits on (the CPU
//            stays free for the allreduce)
//   step     chorus_iallreduce, the same K products, chorus_wait: nothing
//            but the communicator's own thread moves the allreduce while
//            the caller computes
// Each is timed per repetition after a barrier; a rank's figure is the median
// of its repetitions, the printed one the maximum over ranks. With serial =
// comm + compute and ideal = max(comm, compute):
//   overlap        = (serial - step) / (serial - ideal): the share of the
//                    saving that perfect overlap would give (1: all of it,
//                    0: none, the calls ran one after the other)
//   compute_stretch = the products' time inside the step / alone: what the
//                    allreduce took from the caller's CPU
//   ceiling        = the best overlap the CPUs allow (bench/overlap_ceiling.h),
//                    from the process's CPU time in comm and compute alone
// Each step's result is checked: inputs rank + 1, every element must be
// N (N + 1) / 2.
#include <chorus.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "bench_stats.hpp"
#include "matmul_kernel.h"
#include "overlap_ceiling.h"

namespace {

using Clock = std::chrono::steady_clock;

double since_us(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

struct Compute {
  std::size_t side;
  std::vector<float> a, b, c;
  explicit Compute(std::size_t n) : side(n), a(n * n), b(n * n), c(n * n, 0.0f) {
    bench_matmul_fill(a.data(), b.data(), n);
  }
  bool sleep = false;  // -k sleep: products are microseconds asleep
  void run(long products) {
    if (sleep) {
      std::this_thread::sleep_for(std::chrono::microseconds(products));
      return;
    }
    for (long p = 0; p < products; ++p) {
      bench_matmul(a.data(), b.data(), c.data(), side);
      c[std::size_t(p) % c.size()] *= 0.5f;  // keeps C bounded
    }
  }
};

}  // namespace

int overlap_main(int argc, char** argv) {
  std::string min_text = "64K", max_text = "64M", transport, kind = "matmul";
  int factor = 4, iters = 10, warmup = 2;
  double compute_us = 0;
  std::size_t side = 64;
  bool json = false;
  CLI::App app{
      "chorus-bench overlap: an allreduce hidden behind computation, as DDP's buckets are "
      "(run under chorusrun)"};
  app.option_defaults()->always_capture_default();
  app.add_option("-b,--minbytes", min_text, "Smallest size (K/M/G)");
  app.add_option("-e,--maxbytes", max_text, "Largest size (K/M/G)");
  app.add_option("-f,--stepfactor", factor, "Size step factor")->check(CLI::Range(2, 1 << 20));
  app.add_option("-n,--iters", iters, "Timed repetitions of each part")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("-w,--warmup_iters", warmup, "Untimed repetitions first")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--compute-us", compute_us,
                 "Computation per step in microseconds; 0: as long as the allreduce alone")
      ->check(CLI::Range(0.0, 1e8));
  app.add_option("--size", side, "Side of the matrices multiplied")->check(CLI::Range(8, 2048));
  app.add_option("-k,--kind", kind, "The computation: matmul, or sleep (a GPU kernel's wait)")
      ->check(CLI::IsMember({"matmul", "sleep"}));
  app.add_option("-t,--transport", transport, "Transport (sets CHORUS_TRANSPORT)");
  app.add_flag("-J,--json", json, "One JSON object per size");
  CLI11_PARSE(app, argc, argv);
  uint64_t min_bytes = 0, max_bytes = 0;
  if (!bench_parse_bytes(min_text.c_str(), &min_bytes) ||
      !bench_parse_bytes(max_text.c_str(), &max_bytes) || min_bytes < 4 || max_bytes < min_bytes) {
    std::fprintf(stderr, "chorus-bench overlap: bad sizes -b %s -e %s\n", min_text.c_str(),
                 max_text.c_str());
    return 2;
  }
  if (!transport.empty()) setenv("CHORUS_TRANSPORT", transport.c_str(), 1);
  chorus_comm_t comm = nullptr;
  if (int rc = chorus_init_from_env(&comm)) {
    std::fprintf(stderr, "chorus-bench overlap: init: %s: %s\n",
                 chorus_result_string(chorus_result_t(rc)), chorus_comm_last_error(nullptr));
    return 2;
  }
  int rank = 0, nranks = 1;
  chorus_comm_rank(comm, &rank);
  chorus_comm_size(comm, &nranks);
  Compute compute(side);
  compute.sleep = kind == "sleep";

  // One product's time, alone, the slowest rank's: K products per step.
  double per_product = 1;  // sleep: a "product" is a microsecond
  if (!compute.sleep) {
    compute.run(3);
    std::vector<double> product_us;
    for (int i = 0; i < 21; ++i) {
      const auto t0 = Clock::now();
      compute.run(1);
      product_us.push_back(since_us(t0));
    }
    per_product = bench_max_over_ranks(comm, bench_median(product_us));
  }

  const double cores = bench_cores_per_rank(nranks);
  int failed = 0;
  uint64_t total_wrong = 0;
  for (uint64_t bytes = min_bytes; bytes <= max_bytes && !failed; bytes *= uint64_t(factor)) {
    const std::size_t count = bytes / 4;
    std::vector<float> send(count, float(rank + 1)), recv(count, 0.0f);
    const float want = float(nranks) * float(nranks + 1) / 2;
    int rc = 0;
    std::vector<double> comm_t, compute_t, step_t, inside_t, comm_cpu_t, compute_cpu_t;
    const auto allreduce = [&] {
      return chorus_allreduce(comm, send.data(), recv.data(), count, CHORUS_FLOAT32, CHORUS_SUM, 0);
    };
    // comm alone
    for (int i = 0; i < warmup + iters && !rc; ++i) {
      rc = chorus_barrier(comm, 0);
      const double cpu0 = bench_process_cpu_us();
      const auto t0 = Clock::now();
      if (!rc) rc = allreduce();
      if (i >= warmup) {
        comm_t.push_back(since_us(t0));
        comm_cpu_t.push_back(bench_process_cpu_us() - cpu0);
      }
    }
    if (rc) {
      failed = rc;
      break;
    }
    const double comm_us = bench_max_over_ranks(comm, bench_median(comm_t));
    const double target = compute_us > 0 ? compute_us : comm_us;
    const long products = std::max(1L, std::lround(target / per_product));
    // compute alone
    for (int i = 0; i < warmup + iters && !rc; ++i) {
      rc = chorus_barrier(comm, 0);
      const double cpu0 = bench_process_cpu_us();
      const auto t0 = Clock::now();
      compute.run(products);
      if (i >= warmup) {
        compute_t.push_back(since_us(t0));
        compute_cpu_t.push_back(bench_process_cpu_us() - cpu0);
      }
    }
    // the step
    uint64_t wrong = 0;
    for (int i = 0; i < warmup + iters && !rc; ++i) {
      std::fill(recv.begin(), recv.end(), 0.0f);
      rc = chorus_barrier(comm, 0);
      if (rc) break;
      chorus_request_t request = nullptr;
      const auto t0 = Clock::now();
      rc = chorus_iallreduce(comm, send.data(), recv.data(), count, CHORUS_FLOAT32, CHORUS_SUM,
                             &request);
      if (rc) break;
      const auto c0 = Clock::now();
      compute.run(products);
      const double inside = since_us(c0);
      rc = chorus_wait(&request, 0);
      const double step = since_us(t0);
      if (i >= warmup) {
        step_t.push_back(step);
        inside_t.push_back(inside);
      }
      for (float v : recv) wrong += v != want;
    }
    if (rc) {
      failed = rc;
      break;
    }
    uint64_t all_wrong = wrong;
    chorus_allreduce(comm, &wrong, &all_wrong, 1, CHORUS_UINT64, CHORUS_SUM, 0);
    total_wrong += all_wrong;
    const double alone_us = bench_max_over_ranks(comm, bench_median(compute_t));
    const double step_us = bench_max_over_ranks(comm, bench_median(step_t));
    const double inside_us = bench_max_over_ranks(comm, bench_median(inside_t));
    const double serial = comm_us + alone_us, ideal = std::max(comm_us, alone_us);
    const double overlap = serial > ideal ? (serial - step_us) / (serial - ideal) : 0;
    const double stretch = alone_us > 0 ? inside_us / alone_us : 0;
    const double comm_cpu_us = bench_max_over_ranks(comm, bench_median(comm_cpu_t));
    const double compute_cpu_us = bench_max_over_ranks(comm, bench_median(compute_cpu_t));
    const double ceiling =
        bench_overlap_ceiling(comm_us, alone_us, comm_cpu_us, compute_cpu_us, cores);
    if (rank != 0) continue;
    if (json)
      std::printf(
          "{\"impl\": \"chorus\", \"benchmark\": \"overlap\", \"kind\": \"%s\", \"np\": %d, "
          "\"size\": %llu, \"products\": %ld, \"comm_us\": %.3f, \"compute_us\": %.3f, "
          "\"step_us\": %.3f, "
          "\"serial_us\": %.3f, \"ideal_us\": %.3f, \"overlap\": %.4f, "
          "\"compute_stretch\": %.4f, \"comm_cpu_us\": %.3f, \"compute_cpu_us\": %.3f, "
          "\"cores_per_rank\": %.3f, \"overlap_ceiling\": %.4f, \"wrong\": %llu}\n",
          kind.c_str(), nranks, (unsigned long long)bytes, products, comm_us, alone_us, step_us,
          serial, ideal, overlap, stretch, comm_cpu_us, compute_cpu_us, cores, ceiling,
          (unsigned long long)all_wrong);
    else
      std::printf(
          "%12llu B  comm %10.1f us  %s %10.1f us  step %10.1f us  serial %10.1f  ideal %10.1f  "
          "overlap %5.2f  ceiling %4.2f  comm cpu %10.1f us  compute x%.2f  wrong %llu\n",
          (unsigned long long)bytes, comm_us, kind.c_str(), alone_us, step_us, serial, ideal,
          overlap, ceiling, comm_cpu_us, stretch, (unsigned long long)all_wrong);
    std::fflush(stdout);
  }
  if (failed)
    std::fprintf(stderr, "chorus-bench overlap: rank %d: %s: %s\n", rank,
                 chorus_result_string(chorus_result_t(failed)), chorus_comm_last_error(comm));
  else if (rank == 0 && json)
    std::printf(
        "{\"summary\": true, \"impl\": \"chorus\", \"benchmark\": \"overlap\", \"np\": %d, "
        "\"wrong\": %llu}\n",
        nranks, (unsigned long long)total_wrong);
  chorus_comm_destroy(comm);
  return failed ? 2 : total_wrong ? 1 : 0;
}
