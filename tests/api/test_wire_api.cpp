// Compression on the wire through the C and C++ APIs (chorus_allreduce_ex,
// chorus_iallreduce_ex, chorus::AllreduceOptions): results within the bound
// of include/chorus.h against a float64 reference and bit-identical on every
// rank, exactly the 2-rank emulation R(R(a) + R(b)) (R: rounding to the wire
// type, done here with frexp / nearbyint), the contract (a rank that
// compresses and one that does not, or bf16 against f16, fail as
// CHORUS_ERR_MISMATCH on both), and the refusals. The [.wire-env] case runs
// under CHORUS_WIRE_DTYPE=bf16 (meson test c-api-wire-env).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "include/chorus.h"
#include "include/chorus/chorus.hpp"
#include "tests/api/api_harness.hpp"

using chorus::test::all_zero;
using chorus::test::run;
using chorus::test::transports;

namespace {

int bits_of(chorus_dtype_t wire) {
  return wire == CHORUS_BFLOAT16 ? 8 : 11;
}

// The bound of include/chorus.h, (1 + u)^n - 1, with room for avg's division.
double bound(chorus_dtype_t wire, int n) {
  return std::pow(1 + std::ldexp(1.0, -bits_of(wire)), n) - 1 + std::ldexp(1.0, -22);
}

double round_bits(double x, int bits) {
  int e = 0;
  const double m = std::frexp(x, &e);
  return std::ldexp(std::nearbyint(std::ldexp(m, bits)), e - bits);
}

// Positive, 2^-3 to 2^3, every mantissa bit in use.
float wire_value(int rank, std::size_t i) {
  const uint32_t h = static_cast<uint32_t>((i + 1) * 2654435761u ^ (rank + 1) * 40503u);
  const double frac = static_cast<double>(h & 0xFFFFFF) * 0x1p-24;
  return static_cast<float>(std::ldexp(1 + frac, static_cast<int>(h >> 29) - 3));
}

// 0 when out (rank `rank`'s result of a sum or avg over n ranks with `wire`)
// is within the bound, and for 2 ranks the exact emulation; else a code.
int check_result(const std::vector<float>& out, int n, chorus_dtype_t wire, chorus_op_t op) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    double exact = 0;
    for (int r = 0; r < n; ++r) exact += wire_value(r, i);
    if (op == CHORUS_AVG) exact /= n;
    if (!(std::fabs(out[i] - exact) <= bound(wire, n) * exact)) return 100;
    if (n == 2) {
      double want = round_bits(
          round_bits(wire_value(0, i), bits_of(wire)) + round_bits(wire_value(1, i), bits_of(wire)),
          bits_of(wire));
      if (op == CHORUS_AVG) want /= 2;
      if (out[i] != want) return 101;
    }
  }
  return 0;
}

// Compares every rank's result with rank 0's, bit for bit.
bool identical(const std::vector<std::vector<float>>& results) {
  for (const auto& r : results)
    if (r.size() != results[0].size() ||
        std::memcmp(r.data(), results[0].data(), r.size() * sizeof(float)) != 0)
      return false;
  return true;
}

}  // namespace

TEST_CASE("c api: allreduce_ex with bf16 and f16 on the wire", "[wire]") {
  for (const char* transport : transports()) {
    for (int n : {2, 3}) {
      for (chorus_dtype_t wire : {CHORUS_BFLOAT16, CHORUS_FLOAT16}) {
        for (chorus_op_t op : {CHORUS_SUM, CHORUS_AVG}) {
          // 5 (latency paths), 100003 (pipelines, several chunks and segments)
          for (std::size_t count : {std::size_t{5}, std::size_t{100003}}) {
            INFO((transport ? transport : "default")
                 << ", " << n << " ranks, wire " << wire << ", op " << op << ", count " << count);
            std::vector<std::vector<float>> blocking(n), nonblocking(n);
            auto results = run(
                n,
                [&](int rank, chorus_comm_t comm) {
                  std::vector<float> in(count), out(count, NAN);
                  for (std::size_t i = 0; i < count; ++i) in[i] = wire_value(rank, i);
                  chorus_allreduce_options_t o = CHORUS_ALLREDUCE_OPTIONS_INITIALIZER;
                  o.wire_dtype = wire;
                  if (chorus_allreduce_ex(comm, in.data(), out.data(), count, CHORUS_FLOAT32, op,
                                          &o, 0))
                    return 1;
                  for (std::size_t i = 0; i < count; ++i)
                    if (in[i] != wire_value(rank, i)) return 2;  // the input is left alone
                  if (int bad = check_result(out, n, wire, op)) return bad;
                  blocking[rank] = out;
                  // Non-blocking, in place.
                  chorus_request_t req = nullptr;
                  if (chorus_iallreduce_ex(comm, in.data(), in.data(), count, CHORUS_FLOAT32, op,
                                           &o, &req))
                    return 3;
                  if (chorus_wait(&req, 0)) return 4;
                  if (std::memcmp(in.data(), out.data(), count * sizeof(float)) != 0) return 5;
                  nonblocking[rank] = in;
                  return 0;
                },
                transport);
            CHECK(all_zero(results));
            CHECK(identical(blocking));
            CHECK(identical(nonblocking));
          }
        }
      }
    }
  }
}

TEST_CASE("c api: options pass the uncompressed and the default choice through", "[wire]") {
  auto results = run(2, [](int rank, chorus_comm_t comm) {
    std::vector<float> a(33), b(33);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = wire_value(rank, i);
    chorus_allreduce_options_t o = CHORUS_ALLREDUCE_OPTIONS_INITIALIZER;
    if (o.size != sizeof o || o.wire_dtype != CHORUS_WIRE_DTYPE_DEFAULT) return 1;
    // Default (CHORUS_WIRE_DTYPE unset here), NULL options and CHORUS_FLOAT32:
    // exact float32 sums of two values.
    for (int form = 0; form < 3; ++form) {
      o.wire_dtype = form == 2 ? CHORUS_FLOAT32 : CHORUS_WIRE_DTYPE_DEFAULT;
      if (chorus_allreduce_ex(comm, a.data(), b.data(), a.size(), CHORUS_FLOAT32, CHORUS_SUM,
                              form == 1 ? nullptr : &o, 0))
        return 2;
      for (std::size_t i = 0; i < a.size(); ++i)
        if (b[i] != wire_value(0, i) + wire_value(1, i)) return 3;
    }
    // CHORUS_FLOAT32 (uncompressed) is fine with any dtype.
    o.wire_dtype = CHORUS_FLOAT32;
    int64_t x = rank + 1;
    if (chorus_allreduce_ex(comm, &x, &x, 1, CHORUS_INT64, CHORUS_SUM, &o, 0) || x != 3) return 4;
    return 0;
  });
  CHECK(all_zero(results));
}

TEST_CASE("c api: a rank that compresses and one that does not fail as a mismatch", "[wire]") {
  for (const char* transport : transports()) {
    for (int variant = 0; variant < 2; ++variant) {  // none against bf16; f16 against bf16
      INFO((transport ? transport : "default") << ", variant " << variant);
      std::mutex mu;
      std::vector<std::string> messages(2);
      auto results = run(
          2,
          [&](int rank, chorus_comm_t comm) {
            std::vector<float> buf(1031, 1.25f);
            chorus_allreduce_options_t o = CHORUS_ALLREDUCE_OPTIONS_INITIALIZER;
            o.wire_dtype = rank == 0      ? CHORUS_BFLOAT16
                           : variant == 0 ? CHORUS_FLOAT32
                                          : CHORUS_FLOAT16;
            chorus_result_t rc = chorus_allreduce_ex(comm, buf.data(), buf.data(), buf.size(),
                                                     CHORUS_FLOAT32, CHORUS_SUM, &o, 20000);
            std::lock_guard lock(mu);
            messages[rank] = chorus_comm_last_error(comm);
            return rc == CHORUS_ERR_MISMATCH ? 0 : 100 + static_cast<int>(rc);
          },
          transport);
      INFO(messages[0] << "\n" << messages[1]);
      CHECK(all_zero(results));
      for (const auto& m : messages) CHECK(m.find("bfloat16 on the wire") != std::string::npos);
    }
  }
}

TEST_CASE("c api: compression asked of a call that cannot have it is refused", "[wire]") {
  auto results = run(2, [](int, chorus_comm_t comm) {
    int32_t x[4] = {1, 2, 3, 4};
    chorus_allreduce_options_t o = CHORUS_ALLREDUCE_OPTIONS_INITIALIZER;
    o.wire_dtype = CHORUS_BFLOAT16;
    if (chorus_allreduce_ex(comm, x, x, 4, CHORUS_INT32, CHORUS_SUM, &o, 20000) !=
        CHORUS_ERR_INVALID_ARGUMENT)
      return 1;
    // Both ranks refused the same call; the message names the rule.
    if (!std::strstr(chorus_comm_last_error(comm), "float32")) return 2;
    return 0;
  });
  CHECK(all_zero(results));
  for (int bad = 0; bad < 2; ++bad) {
    auto refused = run(2, [bad](int, chorus_comm_t comm) {
      float f[2] = {1, 2};
      chorus_allreduce_options_t o = CHORUS_ALLREDUCE_OPTIONS_INITIALIZER;
      if (bad == 0) o.size = 4;                  // not a chorus_allreduce_options_t
      if (bad == 1) o.wire_dtype = CHORUS_INT8;  // not a wire dtype
      chorus_request_t req = nullptr;
      if (chorus_iallreduce_ex(comm, f, f, 2, CHORUS_FLOAT32, CHORUS_SUM, &o, &req) !=
          CHORUS_ERR_INVALID_ARGUMENT)
        return 1;
      if (req != nullptr) return 2;
      return std::strstr(chorus_comm_last_error(comm), "options") ? 0 : 3;
    });
    INFO("bad " << bad);
    CHECK(all_zero(refused));
  }
}

TEST_CASE("c++ api: AllreduceOptions", "[wire]") {
  auto results = run(2, [](int rank, chorus_comm_t handle) {
    // The C++ API over this thread's handle (the harness owns the communicator).
    std::vector<float> in(100), out(100);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = wire_value(rank, i);
    chorus_allreduce_options_t c = chorus::AllreduceOptions{chorus::Wire::f16}.c();
    if (c.wire_dtype != CHORUS_FLOAT16 || c.size != sizeof c) return 1;
    if (chorus_allreduce_ex(handle, in.data(), out.data(), in.size(), CHORUS_FLOAT32, CHORUS_AVG,
                            &c, 0))
      return 2;
    return check_result(out, 2, CHORUS_FLOAT16, CHORUS_AVG);
  });
  CHECK(all_zero(results));
  // The overloads of chorus::Communicator, as a program uses them.
  chorus::TcpStoreServer server(chorus::test::kToken);
  const std::string addr = server.address();
  std::vector<int> outcome(2, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        auto comm = chorus::Communicator::create(r, 2, addr, chorus::test::kToken);
        std::vector<float> in(77), out(77);
        for (std::size_t i = 0; i < in.size(); ++i) in[i] = wire_value(r, i);
        comm.allreduce(std::span<const float>(in), std::span<float>(out), chorus::Op::sum,
                       chorus::AllreduceOptions{chorus::Wire::bf16});
        int bad = check_result(out, 2, CHORUS_BFLOAT16, CHORUS_SUM);
        comm.iallreduce_inplace(std::span<float>(in), chorus::Op::sum,
                                chorus::AllreduceOptions{chorus::Wire::bf16})
            .wait();
        if (!bad && std::memcmp(in.data(), out.data(), in.size() * sizeof(float)) != 0) bad = 200;
        std::vector<int32_t> ints(3, r);
        try {
          comm.allreduce_inplace(std::span<int32_t>(ints), chorus::Op::sum,
                                 chorus::AllreduceOptions{chorus::Wire::bf16});
          bad = bad ? bad : 300;
        } catch (const chorus::Error& e) {
          if (e.code() != CHORUS_ERR_INVALID_ARGUMENT) bad = bad ? bad : 301;
        }
        outcome[r] = bad;
      } catch (const std::exception&) {
        outcome[r] = 1000;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(outcome[0] == 0);
  CHECK(outcome[1] == 0);
}

// Run with CHORUS_WIRE_DTYPE=bf16 (meson test c-api-wire-env): plain
// float32 allreduce is compressed, other dtypes are not, and a call's own
// CHORUS_FLOAT32 turns it off.
TEST_CASE("CHORUS_WIRE_DTYPE=bf16 compresses float32 allreduce", "[.wire-env]") {
  REQUIRE(std::getenv("CHORUS_WIRE_DTYPE") != nullptr);
  for (const char* transport : transports()) {
    INFO((transport ? transport : "default"));
    auto results = run(
        2,
        [](int rank, chorus_comm_t comm) {
          std::vector<float> in(1001), out(1001);
          for (std::size_t i = 0; i < in.size(); ++i) in[i] = wire_value(rank, i);
          if (chorus_allreduce(comm, in.data(), out.data(), in.size(), CHORUS_FLOAT32, CHORUS_SUM,
                               0))
            return 1;
          if (int bad = check_result(out, 2, CHORUS_BFLOAT16, CHORUS_SUM)) return bad;
          chorus_allreduce_options_t o = CHORUS_ALLREDUCE_OPTIONS_INITIALIZER;
          o.wire_dtype = CHORUS_FLOAT32;
          if (chorus_allreduce_ex(comm, in.data(), out.data(), in.size(), CHORUS_FLOAT32,
                                  CHORUS_SUM, &o, 0))
            return 2;
          for (std::size_t i = 0; i < in.size(); ++i)
            if (out[i] != wire_value(0, i) + wire_value(1, i)) return 3;
          std::vector<int32_t> ints(5, rank + 1);
          if (chorus_allreduce(comm, ints.data(), ints.data(), 5, CHORUS_INT32, CHORUS_SUM, 0))
            return 4;
          for (int32_t v : ints)
            if (v != 3) return 5;
          return 0;
        },
        transport);
    CHECK(all_zero(results));
  }
}
