// chorus-limits: the ceilings of this host that bound a collective within it, in
// the same units as chorus-bench (GB/s = 10^9 bytes/s, per rank), so that a
// benchmark's distance from what the hardware allows is a measured number.
//
// Columns, per size S (medians of --runs runs):
//   copy-1        one thread memcpy's S bytes (chorus-bench's limit column);
//   copy-all      every thread pinned to its own CPU memcpy's its own S bytes
//                 at once: what each core gets when all compete for memory;
//   xchg-shm      two threads on two CPUs exchange S bytes each way through a
//                 ring of three cache-sized slots, as the shared-memory
//                 collectives do: write own slot, wait for the peer's, copy the
//                 peer's slot out. Reading lines that another core has just
//                 written is what a 2-rank allreduce cannot avoid: every rank
//                 receives S bytes from the other, so its busbw is at most this
//                 (the reduction comes on top);
//   xchg-self     the same steps and synchronisation, but each thread copies
//                 its own slot out: xchg-self / xchg-shm is the cost of the
//                 crossing itself;
//   xchg-tcp      two threads on two CPUs exchange S bytes each way over
//                 loopback TCP: the bound of a 2-rank allreduce's busbw over
//                 TCP (limits_tcp.hpp).
#include <sched.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "limits_tcp.hpp"
#include "memcpy_limit.hpp"

namespace {

using chorus_bench::alloc_touched;
using chorus_bench::pin_to_cpu;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The CPUs this process may run on, in order.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// How many copies of `bytes` make one timed run last about `target` seconds.
int64_t copies_for(std::size_t bytes, double target) {
  void* a = alloc_touched(bytes);
  void* b = alloc_touched(bytes);
  int64_t copies = 1;
  for (;;) {
    auto t0 = Clock::now();
    for (int64_t i = 0; i < copies; ++i) std::memcpy(b, a, bytes);
    if (seconds_since(t0) >= target || copies >= (int64_t{1} << 24)) break;
    copies *= 2;
  }
  std::free(a);
  std::free(b);
  return copies;
}

// ------------------------------------------------------------------ copy-all

double copy_all(std::size_t bytes, const std::vector<int>& cpus, int64_t copies) {
  const std::size_t n = cpus.size();
  std::vector<double> gbps(n);
  std::barrier start(static_cast<std::ptrdiff_t>(n));
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      pin_to_cpu(cpus[t]);
      void* src = alloc_touched(bytes);
      void* dst = alloc_touched(bytes);
      start.arrive_and_wait();
      auto t0 = Clock::now();
      for (int64_t i = 0; i < copies; ++i) std::memcpy(dst, src, bytes);
      gbps[t] = static_cast<double>(bytes) * static_cast<double>(copies) / seconds_since(t0) / 1e9;
      std::free(src);
      std::free(dst);
    });
  for (auto& th : threads) th.join();
  return median(gbps);  // per thread
}

// ----------------------------------------------------------------- xchg-shm

struct alignas(64) Counter {
  std::atomic<uint64_t> value{0};
};

// Waits with a short spin, then yields: the peer may share this core.
// Gives up after a minute (the peer thread would have to be stuck), saying so.
void wait_at_least(const Counter& c, uint64_t v) {
  Clock::time_point give_up{};
  for (uint64_t spins = 0; c.value.load(std::memory_order_acquire) < v; ++spins) {
    if (spins <= 256) continue;
    std::this_thread::yield();
    if (spins % 4096 != 0) continue;
    if (give_up == Clock::time_point{}) give_up = Clock::now() + std::chrono::seconds(60);
    if (Clock::now() > give_up) {
      std::fprintf(stderr, "chorus-limits: the exchange's peer thread stopped at step %llu\n",
                   static_cast<unsigned long long>(v));
      std::exit(2);
    }
  }
}

// Each of two threads sends `bytes` to the other `reps` times through
// `block`-byte slots (three per thread), and returns its GB/s. With `self`,
// each copies its own slot out instead of the peer's (same steps otherwise).
double exchange_shm(std::size_t bytes, int64_t reps, std::size_t block,
                    const std::vector<int>& cpus, bool self) {
  constexpr uint64_t kSlots = 3;
  const uint64_t per_rep = (bytes + block - 1) / block;
  const uint64_t blocks = per_rep * static_cast<uint64_t>(reps);
  std::vector<std::byte*> slots(2);
  for (auto& s : slots) s = static_cast<std::byte*>(alloc_touched(kSlots * block));
  Counter staged[2], drained[2];
  double gbps[2] = {0, 0};
  std::barrier start(2);
  auto run = [&](int me) {
    pin_to_cpu(cpus[static_cast<std::size_t>(me) % cpus.size()]);
    const int other = self ? me : 1 - me;
    auto* src = static_cast<std::byte*>(alloc_touched(bytes));
    auto* dst = static_cast<std::byte*>(alloc_touched(bytes));
    start.arrive_and_wait();
    auto t0 = Clock::now();
    for (uint64_t k = 0; k < blocks; ++k) {
      const std::size_t off = (k % per_rep) * block;
      const std::size_t len = std::min<std::size_t>(block, bytes - off);
      const std::size_t slot = (k % kSlots) * block;
      if (k >= kSlots) {  // both have drained the slot's previous block
        wait_at_least(drained[0], k - kSlots + 1);
        wait_at_least(drained[1], k - kSlots + 1);
      }
      std::memcpy(slots[static_cast<std::size_t>(me)] + slot, src + off, len);
      staged[me].value.store(k + 1, std::memory_order_release);
      wait_at_least(staged[1 - me], k + 1);  // lock-step even when reading its own slot
      std::memcpy(dst + off, slots[static_cast<std::size_t>(other)] + slot, len);
      drained[me].value.store(k + 1, std::memory_order_release);
    }
    gbps[me] = static_cast<double>(bytes) * static_cast<double>(reps) / seconds_since(t0) / 1e9;
    std::free(src);
    std::free(dst);
  };
  std::thread first(run, 0), second(run, 1);  // the caller's affinity stays as it was
  first.join();
  second.join();
  for (auto* s : slots) std::free(s);
  return std::min(gbps[0], gbps[1]);
}

}  // namespace

int main(int argc, char** argv) {
  std::string sizes_text = "1M,16M,64M", block_text = "128K";
  int runs = 5;
  int threads = 0;
  CLI::App app{
      "chorus-limits: what this host allows a collective on it (GB/s per rank, medians).\n"
      "copy-1: one thread's memcpy; copy-all: each CPU's memcpy while all copy;\n"
      "xchg-shm: two CPUs exchanging through cache-sized shared slots (bound of a\n"
      "2-rank shared-memory allreduce); xchg-self: same steps without crossing cores;\n"
      "xchg-tcp: the same over loopback TCP (bound of a 2-rank TCP allreduce)."};
  app.add_option("-s,--sizes", sizes_text, "Comma-separated sizes in bytes (K/M/G suffixes)");
  app.add_option("-r,--runs", runs, "Runs per measurement (the median is printed)")
      ->check(CLI::Range(1, 101));
  app.add_option("--block", block_text, "Slot size of xchg-shm and xchg-self");
  app.add_option("--threads", threads, "Threads of copy-all (default: every allowed CPU)")
      ->check(CLI::Range(0, 1024));
  CLI11_PARSE(app, argc, argv);

  std::vector<uint64_t> sizes;
  for (std::size_t at = 0; at <= sizes_text.size();) {
    std::size_t comma = std::min(sizes_text.find(',', at), sizes_text.size());
    uint64_t v = 0;
    std::string item = sizes_text.substr(at, comma - at);
    if (!bench_parse_bytes(item.c_str(), &v) || v == 0) {
      std::fprintf(stderr, "chorus-limits: bad size '%s'\n", item.c_str());
      return 2;
    }
    sizes.push_back(v);
    at = comma + 1;
  }
  uint64_t block = 0;
  if (!bench_parse_bytes(block_text.c_str(), &block) || block < 64) {
    std::fprintf(stderr, "chorus-limits: bad --block '%s'\n", block_text.c_str());
    return 2;
  }
  std::vector<int> cpus = allowed_cpus();
  if (cpus.empty()) cpus.push_back(0);
  std::vector<int> copy_cpus = cpus;
  if (threads > 0) {
    copy_cpus.clear();
    for (int t = 0; t < threads; ++t)
      copy_cpus.push_back(cpus[static_cast<std::size_t>(t) % cpus.size()]);
  }

  std::printf(
      "# chorus-limits: GB/s (10^9 B/s) per thread or process, medians of %d runs; "
      "%zu CPUs allowed; xchg block %llu B\n",
      runs, cpus.size(), static_cast<unsigned long long>(block));
  if (cpus.size() < 2) std::printf("# only one CPU allowed: the xchg columns share it\n");
  std::printf("#%11s %9s %9s %9s %9s %9s\n", "size(B)", "copy-1",
              ("copy-all" + std::to_string(copy_cpus.size())).c_str(), "xchg-shm", "xchg-self",
              "xchg-tcp");
  for (const uint64_t size : sizes) {
    const auto bytes = static_cast<std::size_t>(size);
    double ignored = 0;
    const double one = chorus_bench::measure_memcpy({size}, &ignored)[0];
    const int64_t copies = copies_for(bytes, 0.02);
    // The exchange moves each byte twice and waits at every block: a fifth of
    // the copies still lasts a few milliseconds.
    const int64_t xchg_reps = std::max<int64_t>(1, copies / 5);
    // Loopback TCP runs at a tenth of memcpy's speed or less.
    const int64_t tcp_reps = std::max<int64_t>(1, copies / 20);
    std::vector<double> all, shm, self, tcp;
    for (int r = 0; r < runs; ++r) {  // interleaved, so drifts hit every column alike
      all.push_back(copy_all(bytes, copy_cpus, copies));
      shm.push_back(exchange_shm(bytes, xchg_reps, block, cpus, false));
      self.push_back(exchange_shm(bytes, xchg_reps, block, cpus, true));
      tcp.push_back(chorus_bench::exchange_tcp(bytes, tcp_reps, cpus));
    }
    std::printf("%12llu %9.2f %9.2f %9.2f %9.2f %9.2f\n", static_cast<unsigned long long>(size),
                one, median(all), median(shm), median(self), median(tcp));
    std::fflush(stdout);
  }
  return 0;
}
