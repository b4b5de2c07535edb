// Compression on the wire (collectives/allreduce/wire.hpp) through every
// allreduce algorithm this binary's transport runs (inproc, TCP, UCX: ring
// and recursive doubling; shared memory: those and shm), bf16 and f16 on the
// wire, 2-4 ranks, counts that are not multiples of the segments or pieces.
//
// Tolerance. A wire type with p significant bits rounds to nearest with a
// relative error of at most u = 2^-p (bf16: p = 8, u = 2^-8; f16: p = 11,
// u = 2^-11). Each input is rounded once on the way in, and each partial
// sum once per reduction step; an input passes through at most n - 1 steps
// (ring: n - 1, recursive doubling: log2 n plus a fold, shm: n - 1). With
// values of one sign every partial sum is a sum of positive terms, so
//   |result - exact| <= ((1 + u)^n - 1) * exact       (about n * u)
// and avg adds its float32 division (2^-24). The tests assert
// (1 + u)^n - 1 + 2^-22 against a float64 reference of the float32 inputs;
// the inputs are positive, between 2^-4 and 2^4, so no sum leaves f16's
// normal range and relative error is meaningful. min / max round once.
// With 2 ranks every algorithm computes R(R(a) + R(b)) (R: rounding to the
// wire type), which the tests also check exactly against a rounding of their
// own (frexp / nearbyint, not the library's conversions).
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <cfenv>
#include <cmath>
#include <cstring>
#include <vector>

#include "collectives/allreduce/wire.hpp"
#include "collectives/registry.hpp"
#include "tests/coll/check.hpp"
#include "tests/coll/check_util.hpp"
#include "tests/coll/guarded.hpp"
#include "tests/coll/harness.hpp"
#include "tests/coll/values.hpp"

using namespace chorus;
using namespace chorus::test;

namespace {

constexpr std::size_t kBigWire = 2 * kWirePieceElements + 1031;

int significant_bits(DataType wire) {
  return wire == DataType::bf16 ? 8 : 11;
}

double tolerance(DataType wire, int n) {
  return std::pow(1 + std::ldexp(1.0, -significant_bits(wire)), n) - 1 + std::ldexp(1.0, -22);
}

// Round to `bits` significant bits, to nearest even (normal range only).
double round_bits(double x, int bits) {
  int e = 0;
  const double m = std::frexp(x, &e);  // x = m * 2^e, 0.5 <= m < 1
  return std::ldexp(std::nearbyint(std::ldexp(m, bits)), e - bits);
}

// Rank r's value at element i: positive, from 2^-4 to 2^4, with every
// mantissa bit in use so that rounding to the wire type happens.
float input(int r, std::size_t i) {
  const uint64_t h = mix(r, i);
  const double frac = static_cast<double>(h >> 11) * 0x1p-53;  // [0, 1)
  const int exponent = static_cast<int>(h % 8) - 4;
  return static_cast<float>(std::ldexp(1 + frac, exponent));
}

struct WireCase {
  int ranks;
  std::size_t count;
  DataType wire;
  ReduceOp op;
  std::string_view algo;
  bool in_place;
  std::size_t segment_bytes;
};

std::string describe(const WireCase& c) {
  return fmt::format("{} ranks, count {}, {} on the wire, {}, {}, {}, segment {}", c.ranks, c.count,
                     dtype_name(c.wire), op_name(c.op), c.algo,
                     c.in_place ? "in place" : "out of place", c.segment_bytes);
}

// Runs one compressed allreduce on every rank as the communicator does
// (plan_wire, then run_wire_allreduce with the named algorithm).
void run_compressed(RankEnv& env, const CollectiveCall& call, DataType wire,
                    std::string_view algo) {
  const AlgorithmSpec* spec = find_algorithm(CollectiveKind::allreduce, algo);
  if (!spec) throw InvariantError(fmt::format("no allreduce algorithm {}", algo));
  validate(call, env.rank(), env.size());
  WirePlan plan = plan_wire(call, wire, env.size());
  if (const char* why = spec->refusal(env.team, plan.inner))
    throw InvariantError(fmt::format("{} refuses: {}", algo, why));
  plan.sig.seq = 1;
  plan.sig.algo = algorithm_id(*spec);
  auto ctx = env.context(plan.sig);
  run_wire_allreduce(ctx, *spec, call, plan);
}

std::string check_wire(const WireCase& c) {
  const int n = c.ranks;
  std::vector<Guarded<float>> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    send[r] = Guarded<float>(c.count);
    for (std::size_t i = 0; i < c.count; ++i) send[r][i] = input(r, i);
    if (c.in_place) continue;
    recv[r] = Guarded<float>(c.count);
    for (std::size_t i = 0; i < c.count; ++i) recv[r][i] = NAN;
  }
  RunOptions o;
  o.segment_bytes = c.segment_bytes;
  if (c.segment_bytes > 64) {
    o.shm_piece_bytes = 64 << 10;
    o.shm_small_bytes = 16 << 10;
  }
  auto outcomes = run_ranks(n, o, [&](RankEnv& env) {
    const int r = env.rank();
    CollectiveCall call;
    call.kind = CollectiveKind::allreduce;
    call.send = send[r].data();
    call.recv = c.in_place ? send[r].data() : recv[r].data();
    call.count = c.count;
    call.dtype = DataType::f32;
    call.op = c.op;
    call.wire = c.wire;
    run_compressed(env, call, c.wire, c.algo);
  });
  if (auto f = failures(outcomes); !f.empty()) return f;
  auto out = [&](int r) -> const Guarded<float>& { return c.in_place ? send[r] : recv[r]; };
  for (int r = 1; r < n; ++r)
    if (c.count && std::memcmp(out(r).data(), out(0).data(), c.count * sizeof(float)) != 0)
      return fmt::format("rank {} and rank 0 differ", r);
  const double bound = tolerance(c.wire, n);
  const int bits = significant_bits(c.wire);
  for (std::size_t i = 0; i < c.count; ++i) {
    double exact = c.op == ReduceOp::min ? INFINITY : c.op == ReduceOp::max ? 0 : 0;
    for (int r = 0; r < n; ++r) {
      const double v = input(r, i);
      if (c.op == ReduceOp::min)
        exact = std::min(exact, v);
      else if (c.op == ReduceOp::max)
        exact = std::max(exact, v);
      else
        exact += v;
    }
    if (c.op == ReduceOp::avg) exact /= n;
    const double got = out(0)[i];
    const double err = std::fabs(got - exact) / exact;
    if (!(err <= bound))
      return fmt::format("element {}: {} against {} (relative error {:.3e} > {:.3e})", i, got,
                         exact, err, bound);
    if (n == 2) {  // R(R(a) + R(b)), exactly; avg: that / 2; min / max: R(min / max)
      const double a = round_bits(input(0, i), bits), b = round_bits(input(1, i), bits);
      double want = c.op == ReduceOp::min   ? std::min(a, b)
                    : c.op == ReduceOp::max ? std::max(a, b)
                                            : round_bits(a + b, bits);
      if (c.op == ReduceOp::avg) want /= 2;
      if (got != want)
        return fmt::format("element {}: {} against the 2-rank emulation {}", i, got, want);
    }
  }
  for (int r = 0; r < n && !c.in_place; ++r)
    for (std::size_t i = 0; i < c.count; ++i)
      if (send[r][i] != input(r, i)) return fmt::format("rank {} send buffer changed", r);
  for (int r = 0; r < n; ++r) {
    if (auto d = send[r].guard_damage(fmt::format("rank {} send", r)); !d.empty()) return d;
    if (!c.in_place)
      if (auto d = recv[r].guard_damage(fmt::format("rank {} recv", r)); !d.empty()) return d;
  }
  return "";
}

}  // namespace

TEST_CASE("wire compression: test rounding helper agrees with known values", "[wire]") {
  REQUIRE(std::fegetround() == FE_TONEAREST);
  CHECK(round_bits(1 + 0x1p-8, 8) == 1.0);                   // tie to even (down)
  CHECK(round_bits(1 + 3 * 0x1p-8, 8) == 1 + 0x1p-6);        // tie to even (up)
  CHECK(round_bits(1 + 0x1p-8 + 0x1p-20, 8) == 1 + 0x1p-7);  // above the tie
  CHECK(round_bits(2047.5, 11) == 2048.0);
}

TEST_CASE("wire compression: every algorithm, bf16 and f16, 2-4 ranks, sum/avg/min/max",
          "[wire][allreduce]") {
  for (std::string_view algo : runnable_algorithms(CollectiveKind::allreduce)) {
    for (int n : {2, 3, 4}) {
      for (DataType wire : {DataType::bf16, DataType::f16}) {
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max}) {
          // 64-byte segments (32 wire elements) and pieces: 1, 7, 33 and 1031
          // are no multiple of them; 0: nothing to do; the big one with the
          // default segment: two whole pieces of kWirePieceElements and a
          // part of one.
          for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{33},
                                    std::size_t{1031}, kBigWire}) {
            const bool big = count == kBigWire;
            if (big && op != ReduceOp::sum && op != ReduceOp::avg) continue;
            WireCase c{
                n, count, wire, op, algo, count % 2 == 1 && n % 2 == 0, big ? kDefaultSegment : 64};
            INFO(describe(c));
            REQUIRE(check_wire(c) == "");
          }
        }
      }
    }
  }
}

TEST_CASE("wire compression: a rank that compresses and one that does not fail as a mismatch",
          "[wire][failure]") {
  for (std::string_view algo : runnable_algorithms(CollectiveKind::allreduce)) {
    const std::size_t count = 1031;
    std::vector<std::vector<float>> bufs(2, std::vector<float>(count, 1.5f));
    RunOptions o;
    o.timeout = std::chrono::milliseconds(20000);  // it must fail long before this
    auto outcomes = run_ranks(2, o, [&](RankEnv& env) {
      const int r = env.rank();
      CollectiveCall call;
      call.kind = CollectiveKind::allreduce;
      call.send = call.recv = bufs[r].data();
      call.count = count;
      call.dtype = DataType::f32;
      if (r == 0) {
        run_compressed(env, call, DataType::bf16, algo);
        return;
      }
      run_registered(env, call, algo);
    });
    INFO(algo << "\n" << failures(outcomes));
    int mismatches = 0;
    for (const auto& out : outcomes) {
      CHECK((out.code == CHORUS_ERR_MISMATCH || out.code == CHORUS_ERR_ABORTED));
      if (out.code == CHORUS_ERR_MISMATCH) {
        ++mismatches;
        CHECK(out.message.find("bfloat16 on the wire") != std::string::npos);
      }
    }
    CHECK(mismatches >= 1);
  }
}
