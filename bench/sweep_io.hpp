// The size sweep's command line and output (chorus-bench COLLECTIVE): its
// options, and its table and JSON rows as docs/benchmarks.md defines them
// (the columns nccl-tests prints, plus the memcpy limit and --wire's error).
// chorus_bench.cpp runs the sweep between the two.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "bench_check.hpp"

namespace chorus_bench {

struct Options {
  std::string collective;
  std::string min_text = "8", max_text = "256M", iter_bytes_text = "1G";
  uint64_t min_bytes = 8, max_bytes = 256ull << 20, iter_bytes = 1ull << 30;
  int factor = 2;
  int warmup = 5;
  int iters = 20;
  int check = 1;
  std::string dtype = "float32";
  std::string op = "sum";
  std::string algo = "auto";
  std::string transport;
  int root = 0;
  bool json = false;
  int inplace = 0;
  int blocking = 1;  // 0: chorus_i*() then chorus_wait(), as frameworks that overlap do
  int64_t timeout_ms = 0;
  std::string sync = "barrier";
  bool no_limit = false;
  double period_us = 0;  // --period-us: one timed op per period (bench_period.h); 0: back to back
  std::string wire;      // --wire: float32 allreduce through chorus_allreduce_ex (bench_wire.hpp)
};

// Declares every option of the sweep on `app`, writing into `o`.
void add_sweep_options(CLI::App& app, Options& o);

const char* coll_name(Coll c);
// busbw / algbw: the fraction of the data each rank sends (nccl-tests' factors).
double bus_factor(Coll c, int n);

// What the sweep prints above its rows (rank 0, table form only).
struct SweepHeader {
  Coll coll;
  int nranks;
  const char* dtype;
  const char* op;
  const char* transport;  // nullptr: auto
  double limit_seconds;   // how long the memcpy measurement took (unless --no-limit)
  bool wire;              // --wire given: the wire and relerr columns
};
void print_sweep_header(const Options& o, const SweepHeader& h);

// One row: one size (and wire dtype, with --wire), its time the slowest
// rank's average.
struct SweepRow {
  Coll coll;
  int nranks;
  uint64_t bytes;
  std::size_t elements;
  const char* dtype;
  const char* op;
  int warmup, iters;
  double time_us, algbw, busbw;
  uint64_t wrong;      // with -c 1
  double limit_gbps;   // 0: not measured
  const char* wire;    // nullptr: no --wire
  double max_rel_err;  // with --wire and -c 1
};
void print_sweep_row(const Options& o, const SweepRow& row);

// The closing lines: wrong elements over the sweep, the average busbw, and
// with --wire the largest relative error against its bound.
void print_sweep_summary(const Options& o, Coll coll, int nranks, uint64_t total_wrong,
                         double avg_busbw, bool wire, double max_rel_err, double error_bound);

}  // namespace chorus_bench
