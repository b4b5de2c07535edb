// chorus-load: the CPU load that training puts beside its collectives, to
// measure collectives under it (bench/load_beside.py runs it around each
// benchmark of compare.py --load, for Chorus and Open MPI alike).
//
// Kinds of load, each in --workers threads that are not bound to a CPU:
//   spin     a register-only loop (what `yes > /dev/null` is to the cores);
//            work unit: Giter (10^9 loop iterations)
//   matmul   C += A * B on float32 matrices of --size, in a loop, standing in
//            for backpropagation; work unit: Gflop (2 size^3 per product)
// It runs until --seconds pass, or until SIGINT or SIGTERM, and then prints
// the work it got done per second (all workers together), as a line of text
// or, with -J, one JSON object:
//   {"kind": "matmul", "workers": 2, "seconds": 3.01, "work": 12.3,
//    "unit": "Gflop", "work_per_s": 4.08}
// The figure to read is the ratio of work_per_s beside a collective to
// work_per_s of the same load alone: what the collective cost the load.
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "matmul_kernel.h"

namespace {

std::atomic<bool> stop_requested{false};

extern "C" void on_signal(int) {
  stop_requested.store(true, std::memory_order_relaxed);
}

// Work between checks of the stop flag: long enough that the check costs
// nothing, short enough to stop within a millisecond or so.
constexpr uint64_t kSpinChunk = 1 << 20;

uint64_t spin_chunk(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t i = 0; i < kSpinChunk; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    asm volatile("" : "+r"(x));  // keeps the loop from being folded away
  }
  return x;
}

struct Worker {
  std::atomic<uint64_t> units{0};  // spin chunks or matrix products done
};

void run_worker(const std::string& kind, std::size_t size, Worker& w, uint64_t seed) {
  if (kind == "spin") {
    uint64_t x = seed;
    while (!stop_requested.load(std::memory_order_relaxed)) {
      x = spin_chunk(x);
      w.units.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  std::vector<float> a(size * size), b(size * size), c(size * size, 0.0f);
  bench_matmul_fill(a.data(), b.data(), size);
  while (!stop_requested.load(std::memory_order_relaxed)) {
    bench_matmul(a.data(), b.data(), c.data(), size);
    // Keeps C bounded (and the work real) from product to product.
    c[seed % c.size()] *= 0.5f;
    w.units.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string kind = "spin";
  int workers = static_cast<int>(std::thread::hardware_concurrency());
  double seconds = 0;
  std::size_t size = 128;
  bool json = false;
  CLI::App app{
      "chorus-load: CPU load (spin or float32 matmul) in unbound threads; prints the "
      "work done per second when it stops (--seconds, SIGINT or SIGTERM)"};
  app.option_defaults()->always_capture_default();
  app.add_option("-k,--kind", kind, "spin or matmul")->check(CLI::IsMember({"spin", "matmul"}));
  app.add_option("-w,--workers", workers, "Threads")->check(CLI::Range(1, 4096));
  app.add_option("-s,--seconds", seconds, "Stop after this long (0: at a signal)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--size", size, "matmul: the matrices' side")->check(CLI::Range(8, 4096));
  app.add_flag("-J,--json", json, "One JSON object");
  CLI11_PARSE(app, argc, argv);

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::vector<Worker> counts(static_cast<std::size_t>(workers));
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < workers; ++i)
    threads.emplace_back(run_worker, kind, size, std::ref(counts[static_cast<std::size_t>(i)]),
                         uint64_t(i) + 1);
  while (!stop_requested.load(std::memory_order_relaxed)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (seconds > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= seconds)
      stop_requested.store(true);
  }
  for (auto& t : threads) t.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t units = 0;
  for (const auto& w : counts) units += w.units.load();
  const bool spin = kind == "spin";
  const double per_unit = spin ? double(kSpinChunk) / 1e9 : 2.0 * double(size * size * size) / 1e9;
  const double work = double(units) * per_unit;
  const char* unit = spin ? "Giter" : "Gflop";
  if (json)
    std::printf(
        "{\"kind\": \"%s\", \"workers\": %d, \"seconds\": %.3f, \"work\": %.6f, \"unit\": \"%s\", "
        "\"work_per_s\": %.6f}\n",
        kind.c_str(), workers, elapsed, work, unit, work / elapsed);
  else
    std::printf("%s x%d: %.3f %s in %.2f s = %.3f %s/s\n", kind.c_str(), workers, work, unit,
                elapsed, work / elapsed, unit);
  return 0;
}
