// The size sweep's options and output (sweep_io.hpp).
#include "sweep_io.hpp"

#include <chorus.h>

#include <cinttypes>
#include <cstdio>
#include <limits>

namespace chorus_bench {

void add_sweep_options(CLI::App& app, Options& o) {
  app.option_defaults()->always_capture_default();
  app.add_option("collective", o.collective, "allreduce, allgather, broadcast or reduce-scatter")
      ->required()
      ->check(CLI::IsMember(
          {"allreduce", "allgather", "broadcast", "reduce-scatter", "reduce_scatter"}));
  app.add_option("-b,--minbytes", o.min_text, "Smallest size in bytes (K/M/G suffixes)");
  app.add_option("-e,--maxbytes", o.max_text, "Largest size in bytes (K/M/G suffixes)");
  app.add_option("-f,--stepfactor", o.factor, "Multiply the size by this each step")
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("-w,--warmup_iters", o.warmup, "Warm-up ops per size (capped, see --iter-bytes)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("-n,--iters", o.iters, "Timed ops per size (capped, see --iter-bytes)")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--iter-bytes", o.iter_bytes_text,
                 "Cap on timed bytes per size: iters = clamp(ceil(B/size), 1, -n); warm-up is "
                 "clamp(ceil(B/4/size), 1, -w)");
  app.add_option("-c,--check", o.check, "Check every element of one more op on fresh data (0|1)")
      ->check(CLI::Range(0, 1));
  app.add_option("-d,--datatype", o.dtype,
                 "float32 float64 float16 bfloat16 int8 uint8 int32 uint32 int64 uint64");
  app.add_option("-o,--op", o.op, "sum prod min max avg (reducing collectives)");
  app.add_option(
      "-a,--algo", o.algo,
      "Algorithm (sets CHORUS_ALGO for this collective): auto, or a name chorus-info --plan lists");
  app.add_option("-t,--transport", o.transport,
                 "Transport (sets CHORUS_TRANSPORT): auto, tcp, or another this libchorus has "
                 "(shm); an unknown one fails at init");
  app.add_option("-r,--root", o.root, "Root of broadcast");
  app.add_flag("-J,--json", o.json, "Print one JSON object per line instead of the table");
  app.add_option("-i,--inplace", o.inplace, "In-place operation (0|1)")->check(CLI::Range(0, 1));
  app.add_option("-z,--blocking", o.blocking,
                 "1: blocking calls; 0: non-blocking call then chorus_wait (as nccl-tests' -z)")
      ->check(CLI::Range(0, 1));
  app.add_option("--sync", o.sync,
                 "How ranks line up before warm-up and timing: barrier (chorus_barrier) or "
                 "allreduce (a one-element allreduce, for libraries whose barrier is suspect)")
      ->check(CLI::IsMember({"barrier", "allreduce"}));
  app.add_option("--timeout-ms", o.timeout_ms, "Deadline of each op (0: CHORUS_TIMEOUT)")
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  app.add_option("--period-us", o.period_us,
                 "Start each timed op at the next multiple of this many microseconds of the wall "
                 "clock after the previous op ended (a training step's rate; bench_period.h), and "
                 "time the ops alone; 0: back to back")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--wire", o.wire,
                 "float32 allreduce: dtype on the wire through chorus_allreduce_ex: none, bf16, "
                 "f16, or a list (none,bf16: a row of each per size); -c 1 accepts the error "
                 "bound and prints the largest relative error");
  app.add_flag("--no-limit", o.no_limit,
               "Skip the single-thread memcpy measurement before the sweep (the limit and "
               "%limit columns show -)");
}

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::allreduce:
      return "allreduce";
    case Coll::allgather:
      return "allgather";
    case Coll::broadcast:
      return "broadcast";
    case Coll::reduce_scatter:
      return "reduce_scatter";
  }
  return "?";
}

double bus_factor(Coll c, int n) {
  switch (c) {
    case Coll::allreduce:
      return 2.0 * (n - 1) / n;
    case Coll::allgather:
    case Coll::reduce_scatter:
      return static_cast<double>(n - 1) / n;
    case Coll::broadcast:
      return 1.0;
  }
  return 1.0;
}

void print_sweep_header(const Options& o, const SweepHeader& h) {
  std::printf("# chorus-bench %s: nranks %d, minBytes %" PRIu64 " maxBytes %" PRIu64
              " step: %d(factor) warmup iters: %d iters: %d (at most %" PRIu64
              " bytes per size) check: %d\n",
              coll_name(h.coll), h.nranks, o.min_bytes, o.max_bytes, o.factor, o.warmup, o.iters,
              o.iter_bytes, o.check);
  std::printf("# dtype %s, op %s, algo %s, transport %s, inplace %d, blocking %d%s\n", h.dtype,
              h.op, o.algo.c_str(), h.transport ? h.transport : "auto", o.inplace, o.blocking,
              h.coll == Coll::broadcast ? (", root " + std::to_string(o.root)).c_str() : "");
  std::printf("# libchorus version %d\n", chorus_version());
  if (o.no_limit)
    std::printf("# limit: not measured (--no-limit)\n#\n");
  else
    std::printf(
        "# limit: single-thread memcpy bandwidth at each size on rank 0's host, "
        "measured in %.2f s before the sweep; %%limit = busbw / limit\n#\n",
        h.limit_seconds);
  if (o.period_us > 0)
    std::printf(
        "# --period-us %g: a timed op every %g us at most (at multiples of it); time is the ops' "
        "own\n",
        o.period_us, o.period_us);
  if (h.wire)
    std::printf(
        "# --wire: #wrong counts elements beyond the relative error bound "
        "(1 + u)^n - 1 + 2^-22 (u = 2^-8 bf16, 2^-11 f16); relerr is the largest seen\n");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %10s  %7s  %7s  %7s  %7s  %7s%s\n", "size", "count",
              "type", "redop", "algo", "time", "algbw", "busbw", "#wrong", "limit", "%limit",
              h.wire ? "    wire     relerr" : "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %10s  %7s  %7s  %7s  %7s  %7s\n", "(B)", "(elements)",
              "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(GB/s)", "");
  std::fflush(stdout);
}

void print_sweep_row(const Options& o, const SweepRow& r) {
  const bool have_limit = r.limit_gbps > 0;
  const double pct = have_limit ? 100.0 * r.busbw / r.limit_gbps : 0.0;
  char limit_json[64] = "null", pct_json[64] = "null", limit_txt[32] = "-", pct_txt[32] = "-";
  if (have_limit) {
    std::snprintf(limit_json, sizeof limit_json, "%.6f", r.limit_gbps);
    std::snprintf(pct_json, sizeof pct_json, "%.6f", pct);
    std::snprintf(limit_txt, sizeof limit_txt, "%.3f", r.limit_gbps);
    std::snprintf(pct_txt, sizeof pct_txt, "%.2f", pct);
  }
  // --wire: which wire dtype, and the largest relative error (checked rows).
  char wire_json[96] = "", wire_txt[48] = "";
  if (r.wire) {
    char err[32] = "null";
    if (o.check) std::snprintf(err, sizeof err, "%.3e", r.max_rel_err);
    std::snprintf(wire_json, sizeof wire_json, ", \"wire\": \"%s\", \"max_rel_err\": %s", r.wire,
                  err);
    std::snprintf(wire_txt, sizeof wire_txt, "  %6s  %9s", r.wire, o.check ? err : "N/A");
  }
  const std::string wrong = o.check ? std::to_string(r.wrong) : o.json ? "null" : "N/A";
  if (o.json) {
    std::printf("{\"collective\": \"%s\", \"nranks\": %d, \"size\": %" PRIu64
                ", \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"algo\": \"%s\", "
                "\"root\": %d, \"inplace\": %d, \"blocking\": %d, \"warmup\": %d, \"iters\": %d, "
                "\"time_us\": "
                "%.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, \"wrong\": %s, "
                "\"limit_gbps\": %s, \"pct_limit\": %s, \"period_us\": %g%s}\n",
                coll_name(r.coll), r.nranks, r.bytes, r.elements, r.dtype, r.op, o.algo.c_str(),
                r.coll == Coll::broadcast ? o.root : -1, o.inplace, o.blocking, r.warmup, r.iters,
                r.time_us, r.algbw, r.busbw, wrong.c_str(), limit_json, pct_json, o.period_us,
                wire_json);
  } else {
    std::printf("  %10" PRIu64 "  %12zu  %8s  %6s  %6s  %10.2f  %7.3f  %7.3f  %7s  %7s  %7s%s\n",
                r.bytes, r.elements, r.dtype, r.op, o.algo.c_str(), r.time_us, r.algbw, r.busbw,
                wrong.c_str(), limit_txt, pct_txt, wire_txt);
  }
  std::fflush(stdout);
}

void print_sweep_summary(const Options& o, Coll coll, int nranks, uint64_t total_wrong,
                         double avg_busbw, bool wire, double max_rel_err, double error_bound) {
  if (o.json) {
    std::printf(
        "{\"summary\": true, \"collective\": \"%s\", \"nranks\": %d, \"wrong\": %s, "
        "\"avg_busbw_gbps\": %.6f}\n",
        coll_name(coll), nranks, o.check ? std::to_string(total_wrong).c_str() : "null", avg_busbw);
  } else {
    std::printf("# Out of bounds values : %" PRIu64 " %s\n", total_wrong,
                !o.check      ? "(not checked)"
                : total_wrong ? "FAILED"
                              : "OK");
    if (wire && o.check)
      std::printf("# Max relative error   : %.3e (bound %.3e)\n", max_rel_err, error_bound);
    std::printf("# Avg bus bandwidth    : %g\n#\n", avg_busbw);
  }
  std::fflush(stdout);
}

}  // namespace chorus_bench
