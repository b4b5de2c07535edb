// chorus-bench: nccl-tests style benchmark of Chorus collectives, written
// against the public C API (chorus.h) only.
//
//   chorusrun -np 4 chorus-bench allreduce -b 8 -e 256M -f 2 -c 1
//
// Every rank allocates and touches its buffers once, for the largest size.
// For each size: a barrier, `warmup` untimed ops, a barrier, `iters`
// back-to-back timed ops; the row's time is the maximum over ranks of the
// per-rank average (reduced with CHORUS_MAX after the timed region). With
// -c 1 one more op runs on fresh data and every element of the result is
// compared with a closed-form reference computed on each rank. Only rank 0
// prints. Before the sweep, rank 0 measures the machine's single-thread memcpy
// bandwidth at every size while the other ranks wait at a barrier; the
// limit(GB/s) and %limit columns show it and busbw as a fraction of it
// (--no-limit skips this). See docs/benchmarks.md. The data and reference
// checks live in bench_check.cpp, the memcpy measurement in memcpy_limit.cpp,
// the options and the printed rows in sweep_io.cpp.
#include <chorus.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "bench_check.hpp"
#include "bench_common.h"
#include "bench_period.h"
#include "bench_wire.hpp"
#include "memcpy_limit.hpp"
#include "sweep_io.hpp"

namespace {

using chorus_bench::add_sweep_options;
using chorus_bench::alloc_touched;
using chorus_bench::bus_factor;
using chorus_bench::Coll;
using chorus_bench::coll_name;
using chorus_bench::count_wrong;
using chorus_bench::DtypeInfo;
using chorus_bench::find_dtype;
using chorus_bench::make_pattern;
using chorus_bench::measure_memcpy;
using chorus_bench::Options;
using chorus_bench::Pattern;
using chorus_bench::print_sweep_header;
using chorus_bench::print_sweep_row;
using chorus_bench::print_sweep_summary;
using chorus_bench::WireChoice;
using chorus_bench::with_codec;
using chorus_bench::write_input;

struct OpInfo {
  const char* name;
  chorus_op_t op;
};
const OpInfo kOps[] = {{"sum", CHORUS_SUM},
                       {"prod", CHORUS_PROD},
                       {"min", CHORUS_MIN},
                       {"max", CHORUS_MAX},
                       {"avg", CHORUS_AVG}};

struct Ctx {
  Options opt;
  Coll coll;
  const DtypeInfo* dt;
  chorus_op_t op;
  const char* op_name;
  chorus_comm_t comm = nullptr;
  int rank = 0, nranks = 1;
  unsigned char* sendbuf = nullptr;  // unused for broadcast
  unsigned char* recvbuf = nullptr;
  bool use_ex = false;  // --wire given: allreduce through chorus_allreduce_ex
  chorus_allreduce_options_t ex = CHORUS_ALLREDUCE_OPTIONS_INITIALIZER;  // this row's wire
};

[[noreturn]] void fail(Ctx& c, const char* what, chorus_result_t rc) {
  std::fprintf(stderr, "chorus-bench: rank %d: %s: %s: %s\n", c.rank, what,
               chorus_result_string(rc), chorus_comm_last_error(c.comm));
  std::fflush(stderr);
  if (c.comm) chorus_comm_abort(c.comm, what);
  std::exit(2);
}

// The shape of one row: `count` elements per rank in the op's own terms.
struct Shape {
  size_t count;       // per-rank count passed to the API (sendcount / recvcount)
  size_t elements;    // the "count" column: elements of the size column
  uint64_t bytes;     // the "size" column
  size_t send_bytes;  // bytes of sendbuf used
  size_t recv_bytes;  // bytes of recvbuf used
};

Shape shape_for(const Ctx& c, uint64_t size) {
  const size_t e = c.dt->size, n = static_cast<size_t>(c.nranks);
  Shape s{};
  switch (c.coll) {
    case Coll::allreduce:
    case Coll::broadcast:
      s.count = std::max<size_t>(1, size / e);
      s.elements = s.count;
      s.send_bytes = s.recv_bytes = s.count * e;
      break;
    case Coll::allgather:  // size = the gathered (receive) buffer, as nccl-tests
      s.count = std::max<size_t>(1, size / e / n);
      s.elements = s.count * n;
      s.send_bytes = s.count * e;
      s.recv_bytes = s.elements * e;
      break;
    case Coll::reduce_scatter:  // size = the scattered (send) buffer, as nccl-tests
      s.count = std::max<size_t>(1, size / e / n);
      s.elements = s.count * n;
      s.send_bytes = s.elements * e;
      s.recv_bytes = s.count * e;
      break;
  }
  s.bytes = static_cast<uint64_t>(s.elements) * e;
  return s;
}

// Pointers for one op (NCCL's in-place conventions for allgather/reduce-scatter).
void buffers(const Ctx& c, const Shape& s, void** send, void** recv) {
  const size_t e = c.dt->size;
  *recv = c.recvbuf;
  *send = c.sendbuf;
  if (c.coll == Coll::broadcast) {
    *send = c.recvbuf;
  } else if (c.opt.inplace) {
    if (c.coll == Coll::allreduce) *send = c.recvbuf;
    if (c.coll == Coll::allgather) *send = c.recvbuf + static_cast<size_t>(c.rank) * s.count * e;
    if (c.coll == Coll::reduce_scatter) {
      *send = c.recvbuf;  // the full buffer; result lands at recvbuf + rank * count
      *recv = c.recvbuf + static_cast<size_t>(c.rank) * s.count * e;
    }
  }
}

chorus_result_t run_op(const Ctx& c, const Shape& s) {
  void* send;
  void* recv;
  buffers(c, s, &send, &recv);
  const chorus_dtype_t dt = c.dt->dtype;
  if (c.opt.blocking) {
    switch (c.coll) {
      case Coll::allreduce:
        if (c.use_ex)
          return chorus_allreduce_ex(c.comm, send, recv, s.count, dt, c.op, &c.ex,
                                     c.opt.timeout_ms);
        return chorus_allreduce(c.comm, send, recv, s.count, dt, c.op, c.opt.timeout_ms);
      case Coll::allgather:
        return chorus_allgather(c.comm, send, recv, s.count, dt, c.opt.timeout_ms);
      case Coll::broadcast:
        return chorus_broadcast(c.comm, recv, s.count, dt, c.opt.root, c.opt.timeout_ms);
      case Coll::reduce_scatter:
        return chorus_reduce_scatter(c.comm, send, recv, s.count, dt, c.op, c.opt.timeout_ms);
    }
    return CHORUS_ERR_INTERNAL;
  }
  chorus_request_t request = nullptr;
  chorus_result_t rc = CHORUS_ERR_INTERNAL;
  switch (c.coll) {
    case Coll::allreduce:
      rc = c.use_ex ? chorus_iallreduce_ex(c.comm, send, recv, s.count, dt, c.op, &c.ex, &request)
                    : chorus_iallreduce(c.comm, send, recv, s.count, dt, c.op, &request);
      break;
    case Coll::allgather:
      rc = chorus_iallgather(c.comm, send, recv, s.count, dt, &request);
      break;
    case Coll::broadcast:
      rc = chorus_ibroadcast(c.comm, recv, s.count, dt, c.opt.root, &request);
      break;
    case Coll::reduce_scatter:
      rc = chorus_ireduce_scatter(c.comm, send, recv, s.count, dt, c.op, &request);
      break;
  }
  return rc == CHORUS_SUCCESS ? chorus_wait(&request, c.opt.timeout_ms) : rc;
}

// Fills the inputs of one checked op with fresh data and the outputs with the
// 0xFF sentinel (NaN for floats, -1 / max for integers: never an expected value).
// Returns the number of wrong elements after running the op (with --wire: the
// elements beyond the error bound, and the largest relative error in *rel_err).
uint64_t checked_run(Ctx& c, const Shape& s, const Pattern& p, double* rel_err) {
  std::memset(c.recvbuf, 0xff, c.opt.inplace ? std::max(s.send_bytes, s.recv_bytes) : s.recv_bytes);
  // The op's own buffers: its input (sendbuf, or recvbuf in place) and its result.
  void* send;
  void* recv;
  buffers(c, s, &send, &recv);
  write_input(c.coll, c.dt->dtype, p, c.rank, c.opt.root, s.count, send);
  chorus_result_t rc = run_op(c, s);
  if (rc != CHORUS_SUCCESS) fail(c, "checked op", rc);
  if (c.use_ex) {
    const auto checked =
        chorus_bench::check_wire(p, s.count, static_cast<const float*>(recv),
                                 chorus_bench::wire_error_bound(c.ex.wire_dtype, c.nranks));
    *rel_err = checked.max_rel_err;
    return checked.wrong;
  }
  return count_wrong(c.coll, c.dt->dtype, p, c.rank, c.opt.root, s.count, recv);
}

void fill_untimed(Ctx& c, const Shape& s) {
  // Deterministic, modest data for the timed ops (values do not matter for speed,
  // but keep floats finite so no NaN/denormal paths are timed).
  with_codec(c.dt->dtype, [&](auto codec) {
    using C = decltype(codec);
    const size_t e = c.dt->size;
    const bool separate_send = c.coll != Coll::broadcast && !c.opt.inplace;
    const size_t n_recv = (separate_send ? s.recv_bytes : std::max(s.send_bytes, s.recv_bytes)) / e;
    for (size_t i = 0; i < n_recv; ++i) C::put(c.recvbuf, i, static_cast<double>((i + c.rank) & 1));
    if (separate_send)
      for (size_t i = 0; i < s.send_bytes / e; ++i)
        C::put(c.sendbuf, i, static_cast<double>((i + c.rank) & 1));
  });
}

// Reduces one value over all ranks (outside any timed region). The value is
// padded to one element per rank (the others neutral: 0 for sum, the value
// itself for max) so that no ring step of the reduction is an empty message.
template <typename T>
T reduce_scalar(Ctx& c, T value, chorus_dtype_t dtype, chorus_op_t op, const char* what) {
  std::vector<T> v(static_cast<size_t>(c.nranks), op == CHORUS_SUM ? T{} : value);
  v[0] = value;
  chorus_result_t rc =
      chorus_allreduce(c.comm, v.data(), v.data(), v.size(), dtype, op, c.opt.timeout_ms);
  if (rc != CHORUS_SUCCESS) fail(c, what, rc);
  return v[0];
}

// Lines the ranks up outside any timed region (timeout_ms < 0: --timeout-ms).
chorus_result_t sync_ranks(const Ctx& c, int64_t timeout_ms = -1) {
  if (timeout_ms < 0) timeout_ms = c.opt.timeout_ms;
  if (c.opt.sync == "barrier") return chorus_barrier(c.comm, timeout_ms);
  // One element per rank, so no ring step carries an empty message.
  std::vector<int32_t> tokens(static_cast<size_t>(c.nranks), 0);
  return chorus_allreduce(c.comm, tokens.data(), tokens.data(), tokens.size(), CHORUS_INT32,
                          CHORUS_SUM, timeout_ms);
}

}  // namespace

int fusion_main(int argc, char** argv);   // fusion_bench.cpp
int overlap_main(int argc, char** argv);  // overlap_bench.cpp

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "fusion") return fusion_main(argc - 1, argv + 1);
  if (argc > 1 && std::string(argv[1]) == "overlap") return overlap_main(argc - 1, argv + 1);
  Options o;
  CLI::App app{
      "chorus-bench: nccl-tests style benchmark of Chorus collectives (run under chorusrun)."};
  add_sweep_options(app, o);
  CLI11_PARSE(app, argc, argv);

  Ctx c;
  if (o.collective == "allreduce") c.coll = Coll::allreduce;
  if (o.collective == "allgather") c.coll = Coll::allgather;
  if (o.collective == "broadcast") c.coll = Coll::broadcast;
  if (o.collective == "reduce-scatter" || o.collective == "reduce_scatter")
    c.coll = Coll::reduce_scatter;
  if (!bench_parse_bytes(o.min_text.c_str(), &o.min_bytes) ||
      !bench_parse_bytes(o.max_text.c_str(), &o.max_bytes) ||
      !bench_parse_bytes(o.iter_bytes_text.c_str(), &o.iter_bytes) || o.min_bytes == 0 ||
      o.min_bytes > o.max_bytes) {
    std::fprintf(stderr, "chorus-bench: bad sizes: -b %s -e %s --iter-bytes %s\n",
                 o.min_text.c_str(), o.max_text.c_str(), o.iter_bytes_text.c_str());
    return 2;
  }
  c.dt = find_dtype(o.dtype);
  if (!c.dt) {
    std::fprintf(stderr, "chorus-bench: unknown datatype '%s'\n", o.dtype.c_str());
    return 2;
  }
  c.op = CHORUS_SUM;
  c.op_name = nullptr;
  for (const auto& op : kOps)
    if (o.op == op.name) c.op = op.op, c.op_name = op.name;
  if (!c.op_name) {
    std::fprintf(stderr, "chorus-bench: unknown op '%s' (sum prod min max avg)\n", o.op.c_str());
    return 2;
  }
  std::vector<WireChoice> wires;  // empty: no --wire
  if (!o.wire.empty()) {
    std::string why;
    if (!chorus_bench::parse_wires(o.wire, &wires, &why)) {
      std::fprintf(stderr, "chorus-bench: --wire: %s\n", why.c_str());
      return 2;
    }
    if (c.coll != Coll::allreduce || c.dt->dtype != CHORUS_FLOAT32) {
      std::fprintf(stderr, "chorus-bench: --wire needs allreduce of float32\n");
      return 2;
    }
    c.use_ex = true;
  }
  const bool reducing = c.coll == Coll::allreduce || c.coll == Coll::reduce_scatter;
  if (!reducing) c.op_name = "none";
  // Algorithm names are the library's (chorus-info --plan lists them): an
  // unknown one fails chorus_init, naming the known ones.
  // A tool may set its own environment before the library reads its configuration.
  if (!o.transport.empty()) setenv("CHORUS_TRANSPORT", o.transport.c_str(), 1);
  if (o.algo != "auto") {
    std::string spec = std::string(coll_name(c.coll)) + ":0-inf:" + o.algo;
    setenv("CHORUS_ALGO", spec.c_str(), 1);
  }
  c.opt = o;

  chorus_result_t rc = chorus_init_from_env(&c.comm);
  if (rc != CHORUS_SUCCESS) {
    std::fprintf(stderr, "chorus-bench: chorus_init_from_env: %s: %s\n", chorus_result_string(rc),
                 chorus_comm_last_error(nullptr));
    return 2;
  }
  chorus_comm_rank(c.comm, &c.rank);
  chorus_comm_size(c.comm, &c.nranks);
  if (c.coll == Coll::broadcast && (o.root < 0 || o.root >= c.nranks)) {
    if (c.rank == 0)
      std::fprintf(stderr, "chorus-bench: root %d is not a rank of %d\n", o.root, c.nranks);
    chorus_comm_destroy(c.comm);
    return 2;
  }
  // One row variant per wire dtype (one without --wire), each with its pattern.
  if (wires.empty()) wires.push_back({"", CHORUS_WIRE_DTYPE_DEFAULT});
  std::vector<Pattern> patterns(wires.size());
  for (size_t v = 0; v < wires.size() && o.check; ++v) {
    std::string why;
    const bool ok = c.use_ex ? chorus_bench::make_wire_pattern(wires[v].dtype, *c.dt, c.op,
                                                               c.nranks, &patterns[v], &why)
                             : make_pattern(c.coll, *c.dt, c.op, c.nranks, &patterns[v], &why);
    if (!ok) {
      if (c.rank == 0)
        std::fprintf(stderr, "chorus-bench: cannot check exactly (%s); use -c 0 or another -d\n",
                     why.c_str());
      chorus_comm_destroy(c.comm);
      return 2;
    }
  }

  // Sizes: min, min*f, ... <= max, deduplicated after rounding to whole elements.
  std::vector<Shape> shapes;
  for (uint64_t size = o.min_bytes; size <= o.max_bytes;) {
    Shape s = shape_for(c, size);
    if (shapes.empty() || shapes.back().bytes != s.bytes) shapes.push_back(s);
    if (size > o.max_bytes / static_cast<uint64_t>(o.factor)) break;
    size *= static_cast<uint64_t>(o.factor);
  }
  size_t max_send = 0, max_recv = 0;
  for (const auto& s : shapes) {
    max_send = std::max(max_send, s.send_bytes);
    max_recv = std::max(max_recv, s.recv_bytes);
  }
  if (c.opt.inplace) max_recv = std::max(max_recv, max_send);
  c.recvbuf = static_cast<unsigned char*>(alloc_touched(max_recv));
  c.sendbuf = static_cast<unsigned char*>(
      alloc_touched(c.coll == Coll::broadcast || c.opt.inplace ? 0 : max_send));

  // The limit table: rank 0 copies memory alone (the others have allocated and
  // touched their buffers, and wait at a barrier, asleep after CHORUS_SPIN_US;
  // --sync allreduce swaps the barrier for a one-element allreduce, as for the
  // sweep), then broadcasts it so every rank holds the same figures.
  std::vector<double> limit_gbps;
  double limit_seconds = 0;
  if (!o.no_limit) {
    if ((rc = sync_ranks(c)) != CHORUS_SUCCESS) fail(c, "sync before the memcpy measurement", rc);
    std::vector<uint64_t> sizes;
    for (const Shape& s : shapes) sizes.push_back(s.bytes);
    if (c.rank == 0) limit_gbps = measure_memcpy(sizes, &limit_seconds);
    // The wait spans the measurement (seconds), so a short --timeout-ms is raised.
    const int64_t wait_ms = o.timeout_ms == 0 ? 0 : std::max<int64_t>(o.timeout_ms, 60000);
    if ((rc = sync_ranks(c, wait_ms)) != CHORUS_SUCCESS)
      fail(c, "sync after the memcpy measurement", rc);
    // One element per rank at least, so no step of the broadcast is empty.
    limit_gbps.resize(std::max(shapes.size(), static_cast<size_t>(c.nranks)), 0.0);
    if ((rc = chorus_broadcast(c.comm, limit_gbps.data(), limit_gbps.size(), CHORUS_FLOAT64, 0,
                               o.timeout_ms)) != CHORUS_SUCCESS)
      fail(c, "broadcast of the memcpy table", rc);
    limit_gbps.resize(shapes.size());
  }

  const char* transport = getenv("CHORUS_TRANSPORT");
  if (c.rank == 0 && !o.json)
    print_sweep_header(
        o, {c.coll, c.nranks, c.dt->name, c.op_name, transport, limit_seconds, c.use_ex});

  uint64_t total_wrong = 0;
  double busbw_sum = 0, max_rel_err = 0;
  int rows = 0;
  for (size_t row_variant = 0; row_variant < shapes.size() * wires.size(); ++row_variant) {
    const size_t row = row_variant / wires.size(), variant = row_variant % wires.size();
    const Shape& s = shapes[row];
    c.ex.wire_dtype = wires[variant].dtype;
    const Pattern& pattern = patterns[variant];
    double rel_err = 0;
    const int iters = bench_iters_for(s.bytes, o.iter_bytes, o.iters);
    const int warmup = bench_warmup_for(s.bytes, o.iter_bytes, o.warmup);

    fill_untimed(c, s);
    if ((rc = sync_ranks(c)) != CHORUS_SUCCESS) fail(c, o.sync.c_str(), rc);
    for (int i = 0; i < warmup; ++i)
      if ((rc = run_op(c, s)) != CHORUS_SUCCESS) fail(c, "warm-up op", rc);
    if ((rc = sync_ranks(c)) != CHORUS_SUCCESS) fail(c, o.sync.c_str(), rc);
    double avg_us = 0;
    if (o.period_us > 0) {  // each op timed alone, the sleeps between them not
      double op_seconds = 0;
      for (int i = 0; i < iters; ++i) {
        bench_sleep_to_next_period(o.period_us);
        const double start_s = bench_monotonic_s();
        if ((rc = run_op(c, s)) != CHORUS_SUCCESS) fail(c, "timed op", rc);
        op_seconds += bench_monotonic_s() - start_s;
      }
      avg_us = op_seconds * 1e6 / iters;
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i)
        if ((rc = run_op(c, s)) != CHORUS_SUCCESS) fail(c, "timed op", rc);
      const auto t1 = std::chrono::steady_clock::now();
      avg_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
    }
    // Outside the timed region: the slowest rank's average.
    avg_us = reduce_scalar(c, avg_us, CHORUS_FLOAT64, CHORUS_MAX, "time reduction");

    uint64_t wrong = 0;
    if (o.check) {
      wrong = checked_run(c, s, pattern, &rel_err);
      wrong = reduce_scalar(c, wrong, CHORUS_UINT64, CHORUS_SUM, "wrong-count reduction");
      if (c.use_ex)
        rel_err = reduce_scalar(c, rel_err, CHORUS_FLOAT64, CHORUS_MAX, "error reduction");
      max_rel_err = std::max(max_rel_err, rel_err);
      total_wrong += wrong;
    }
    const double algbw = static_cast<double>(s.bytes) / (avg_us * 1e-6) / 1e9;
    const double busbw = algbw * bus_factor(c.coll, c.nranks);
    busbw_sum += busbw;
    ++rows;
    if (c.rank != 0) continue;
    const bool have_limit = !o.no_limit && limit_gbps[row] > 0;
    print_sweep_row(o, {c.coll, c.nranks, s.bytes, s.elements, c.dt->name, c.op_name, warmup, iters,
                        avg_us, algbw, busbw, wrong, have_limit ? limit_gbps[row] : 0.0,
                        c.use_ex ? wires[variant].name.c_str() : nullptr, rel_err});
  }

  const double avg_busbw = rows ? busbw_sum / rows : 0.0;
  if (c.rank == 0) {
    double bound = 0;
    for (const auto& w : wires)
      bound = std::max(bound, chorus_bench::wire_error_bound(w.dtype, c.nranks));
    print_sweep_summary(o, c.coll, c.nranks, total_wrong, avg_busbw, c.use_ex, max_rel_err, bound);
  }
  rc = chorus_comm_destroy(c.comm);
  std::free(c.sendbuf);
  std::free(c.recvbuf);
  if (rc != CHORUS_SUCCESS) {
    std::fprintf(stderr, "chorus-bench: rank %d: chorus_comm_destroy: %s\n", c.rank,
                 chorus_result_string(rc));
    return 2;
  }
  return total_wrong == 0 ? 0 : 1;
}