#include "tests/coll/check.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "collectives/allreduce/recursive_doubling.hpp"
#include "collectives/allreduce/ring.hpp"
#include "collectives/allreduce/shm.hpp"
#include "collectives/broadcast/ring.hpp"
#include "collectives/broadcast/shm.hpp"
#include "tests/coll/check_util.hpp"
#include "tests/coll/guarded.hpp"
#include "tests/coll/harness.hpp"
#include "tests/coll/values.hpp"

namespace chorus::test {

std::string describe_case(const Case& c) {
  return fmt::format(
      "ranks {} count {} {} {} {} segment {} root {}{}{}{}{}{}", c.ranks, c.count,
      dtype_name(c.dtype), op_name(c.op), c.in_place ? "in-place" : "out-of-place", c.segment_bytes,
      c.root, c.algorithm.empty() ? "" : " algorithm ", c.algorithm,
      c.hosts.empty() ? "" : " hosts ", c.hosts,
      c.ring_round_bytes ? fmt::format(" rounds of {} bytes", c.ring_round_bytes) : "");
}

namespace {

// The allreduce algorithm of the case on this rank's transport: c.algorithm
// when it names one (through the registry), else shm, recursive doubling or
// the ring.
void run_allreduce(const Case& c, RankEnv& env, const void* send, void* recv, DataType dtype,
                   ReduceOp op) {
  if (!c.algorithm.empty()) {
    CollectiveCall call;
    call.kind = CollectiveKind::allreduce;
    call.send = send;
    call.recv = recv;
    call.count = c.count;
    call.dtype = dtype;
    call.op = op;
    run_registered(env, call, c.algorithm);
    return;
  }
  auto ctx = env.context(make_sig(CollectiveKind::allreduce, 1, c.count, dtype, op));
  if (env.shm)
    shm_allreduce(ctx, send, recv, c.count, dtype, op);
  else if (c.recursive_doubling)
    recursive_doubling_allreduce(ctx, send, recv, c.count, dtype, op);
  else
    ring_allreduce(ctx, send, recv, c.count, dtype, op);
}

template <typename Tr>
std::string broadcast(const Case& c) {
  const int n = c.ranks;
  auto want = [&](std::size_t i) { return gen<Tr>(c.root, i, ReduceOp::sum); };
  Buffers<Tr> buf(n);
  for (int r = 0; r < n; ++r) {
    buf[r] = Guarded<typename Tr::T>(c.count);
    for (std::size_t i = 0; i < c.count; ++i) buf[r][i] = r == c.root ? want(i) : unlike(want(i));
  }
  auto outcomes = run_ranks(n, options_for(c), [&](RankEnv& env) {
    const int r = env.rank();
    if (!c.algorithm.empty()) {
      CollectiveCall call;
      call.kind = CollectiveKind::broadcast;
      call.recv = buf[r].data();
      call.count = c.count;
      call.dtype = Tr::dt;
      call.root = c.root;
      run_registered(env, call, c.algorithm);
      return;
    }
    auto ctx =
        env.context(make_sig(CollectiveKind::broadcast, 1, c.count, Tr::dt, ReduceOp::sum, c.root));
    if (env.shm)
      shm_broadcast(ctx, buf[r].data(), c.count, Tr::dt, c.root);
    else
      ring_broadcast(ctx, buf[r].data(), c.count, Tr::dt, c.root);
  });
  if (auto f = failures(outcomes); !f.empty()) return f;
  for (int r = 0; r < n; ++r) {
    auto err = compare<Tr>("result", r, buf[r], 0, c.count, ReduceOp::sum, want);
    if (!err.empty()) return err;
  }
  return guard_damage(buf, "buffer");
}

// Random values where the order of reduction changes the rounding: every
// rank must still end with the same bits, close to the float64 reference.
template <typename Tr>
std::string allreduce_identical(const Case& c) {
  const int n = c.ranks;
  auto value = [&](int r, std::size_t i) {
    const double u = static_cast<double>(mix(r, i) >> 11) * 0x1p-53;  // [0, 1)
    // prod: factors in [0.5, 2) keep products of 8 ranks normal in every dtype.
    return Tr::from(c.op == ReduceOp::prod ? 0.5 + 1.5 * u : 2 * u - 1);
  };
  Buffers<Tr> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    send[r] = Guarded<typename Tr::T>(c.count);
    for (std::size_t i = 0; i < c.count; ++i) send[r][i] = value(r, i);
    if (c.in_place) continue;
    recv[r] = Guarded<typename Tr::T>(c.count);
    for (std::size_t i = 0; i < c.count; ++i) recv[r][i] = unlike(typename Tr::T{});  // NaN
  }
  auto outcomes = run_ranks(n, options_for(c), [&](RankEnv& env) {
    const int r = env.rank();
    run_allreduce(c, env, send[r].data(), c.in_place ? send[r].data() : recv[r].data(), Tr::dt,
                  c.op);
  });
  if (auto f = failures(outcomes); !f.empty()) return f;
  const auto& first = c.in_place ? send[0] : recv[0];
  for (int r = 1; r < n; ++r) {
    const auto& out = c.in_place ? send[r] : recv[r];
    if (c.count && std::memcmp(out.data(), first.data(), c.count * sizeof(typename Tr::T)) != 0) {
      std::size_t i = 0;
      while (std::memcmp(&out[i], &first[i], sizeof(typename Tr::T)) == 0) ++i;
      return fmt::format("rank {} and rank 0 differ at element {}: {} against {}", r, i,
                         Tr::to(out[i]), Tr::to(first[i]));
    }
  }
  // Each partial result is rounded once per step: at most n + 1 roundings.
  for (std::size_t i = 0; i < c.count; ++i) {
    double ref = c.op == ReduceOp::prod ? 1 : 0, mag = 0;
    for (int r = 0; r < n; ++r) {
      const double v = Tr::to(value(r, i));
      ref = c.op == ReduceOp::prod ? ref * v : ref + v;
      mag += std::fabs(v);
    }
    if (c.op == ReduceOp::avg) ref /= n, mag /= n;
    const double bound = (n + 1) * Tr::eps() * (c.op == ReduceOp::prod ? std::fabs(ref) : mag);
    const double got = Tr::to(first[i]);
    if (!(std::fabs(got - ref) <= bound))
      return fmt::format("element {}: got {} want {} (within {})", i, got, ref, bound);
  }
  if (auto d = guard_damage(send, "send buffer"); !d.empty()) return d;
  return guard_damage(recv, "receive buffer");
}

}  // namespace

std::string check_broadcast(const Case& c) {
  return with_dtype(c.dtype, [&](auto tr) { return broadcast<decltype(tr)>(c); });
}
std::string check_allreduce_identical(const Case& c) {
  return with_dtype(c.dtype, [&](auto tr) -> std::string {
    if constexpr (decltype(tr)::fp)
      return allreduce_identical<decltype(tr)>(c);
    else
      return "check_allreduce_identical: a float dtype is needed";
  });
}

}  // namespace chorus::test
