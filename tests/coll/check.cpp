#include "tests/coll/check.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "collectives/allgather/ring.hpp"
#include "collectives/allgather/shm.hpp"
#include "collectives/allreduce/recursive_doubling.hpp"
#include "collectives/allreduce/ring.hpp"
#include "collectives/allreduce/shm.hpp"
#include "collectives/broadcast/ring.hpp"
#include "collectives/broadcast/shm.hpp"
#include "collectives/reduce_scatter/ring.hpp"
#include "collectives/reduce_scatter/shm.hpp"
#include "tests/coll/check_util.hpp"
#include "tests/coll/guarded.hpp"
#include "tests/coll/harness.hpp"
#include "tests/coll/values.hpp"

namespace chorus::test {

std::string describe_case(const Case& c) {
  return fmt::format("ranks {} count {} {} {} {} segment {} root {}{}{}", c.ranks, c.count,
                     dtype_name(c.dtype), op_name(c.op), c.in_place ? "in-place" : "out-of-place",
                     c.segment_bytes, c.root, c.algorithm.empty() ? "" : " algorithm ",
                     c.algorithm);
}

namespace {

// The allreduce algorithm of the case on this rank's transport.
void run_allreduce(const Case& c, RankEnv& env, const void* send, void* recv, DataType dtype,
                   ReduceOp op) {
  auto ctx = env.context(make_sig(CollectiveKind::allreduce, 1, c.count, dtype, op));
  if (env.shm)
    shm_allreduce(ctx, send, recv, c.count, dtype, op);
  else if (c.recursive_doubling)
    recursive_doubling_allreduce(ctx, send, recv, c.count, dtype, op);
  else
    ring_allreduce(ctx, send, recv, c.count, dtype, op);
}

template <typename Tr>
std::string allreduce(const Case& c) {
  const int n = c.ranks;
  std::vector<typename Tr::T> want(c.count);
  for (std::size_t i = 0; i < c.count; ++i) want[i] = reference<Tr>(n, i, c.op);
  Buffers<Tr> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    send[r] = Guarded<typename Tr::T>(c.count);
    for (std::size_t i = 0; i < c.count; ++i) send[r][i] = gen<Tr>(r, i, c.op);
    if (c.in_place) continue;
    recv[r] = Guarded<typename Tr::T>(c.count);
    for (std::size_t i = 0; i < c.count; ++i) recv[r][i] = unlike(want[i]);
  }
  auto outcomes = run_ranks(n, options_for(c), [&](RankEnv& env) {
    const int r = env.rank();
    run_allreduce(c, env, send[r].data(), c.in_place ? send[r].data() : recv[r].data(), Tr::dt,
                  c.op);
  });
  if (auto f = failures(outcomes); !f.empty()) return f;
  for (int r = 0; r < n; ++r) {
    const auto& out = c.in_place ? send[r] : recv[r];
    auto err =
        compare<Tr>("result", r, out, 0, c.count, c.op, [&](std::size_t i) { return want[i]; });
    if (err.empty() && !c.in_place)
      err = compare<Tr>("send buffer (must be unchanged)", r, send[r], 0, c.count, ReduceOp::sum,
                        [&](std::size_t i) { return gen<Tr>(r, i, c.op); });
    if (!err.empty()) return err;
  }
  if (auto d = guard_damage(send, "send buffer"); !d.empty()) return d;
  return guard_damage(recv, "receive buffer");
}

template <typename Tr>
std::string reduce_scatter(const Case& c) {
  const int n = c.ranks;
  const std::size_t rc = c.count, total = rc * static_cast<std::size_t>(n);
  Buffers<Tr> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    send[r] = Guarded<typename Tr::T>(total);
    for (std::size_t i = 0; i < total; ++i) send[r][i] = gen<Tr>(r, i, c.op);
    if (c.in_place) continue;
    recv[r] = Guarded<typename Tr::T>(rc);
    const std::size_t base = static_cast<std::size_t>(r) * rc;
    for (std::size_t i = 0; i < rc; ++i) recv[r][i] = unlike(reference<Tr>(n, base + i, c.op));
  }
  auto outcomes = run_ranks(n, options_for(c), [&](RankEnv& env) {
    const int r = env.rank();
    auto ctx = env.context(make_sig(CollectiveKind::reduce_scatter, 1, rc, Tr::dt, c.op));
    auto* out = c.in_place ? send[r].data() + static_cast<std::size_t>(r) * rc : recv[r].data();
    if (env.shm)
      shm_reduce_scatter(ctx, send[r].data(), out, rc, Tr::dt, c.op);
    else
      ring_reduce_scatter(ctx, send[r].data(), out, rc, Tr::dt, c.op);
  });
  if (auto f = failures(outcomes); !f.empty()) return f;
  for (int r = 0; r < n; ++r) {
    const std::size_t base = static_cast<std::size_t>(r) * rc;
    const auto& out = c.in_place ? send[r] : recv[r];
    auto err = compare<Tr>("result", r, out, c.in_place ? base : 0, rc, c.op,
                           [&](std::size_t i) { return reference<Tr>(n, base + i, c.op); });
    // The send buffer is never written (in place: except the rank's own block).
    if (err.empty())
      err = compare<Tr>("send buffer (must be unchanged)", r, send[r], 0, total, ReduceOp::sum,
                        [&](std::size_t i) {
                          const bool own = c.in_place && i >= base && i < base + rc;
                          return own ? send[r][i] : gen<Tr>(r, i, c.op);
                        });
    if (!err.empty()) return err;
  }
  if (auto d = guard_damage(send, "send buffer"); !d.empty()) return d;
  return guard_damage(recv, "receive buffer");
}

template <typename Tr>
std::string allgather(const Case& c) {
  const int n = c.ranks;
  const std::size_t sc = c.count, total = sc * static_cast<std::size_t>(n);
  auto want = [&](std::size_t i) {
    return gen<Tr>(static_cast<int>(i / sc), i % sc, ReduceOp::sum);
  };
  Buffers<Tr> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    recv[r] = Guarded<typename Tr::T>(total);
    for (std::size_t i = 0; i < total; ++i) recv[r][i] = unlike(want(i));
    const std::size_t base = static_cast<std::size_t>(r) * sc;
    if (c.in_place) {
      for (std::size_t i = 0; i < sc; ++i) recv[r][base + i] = gen<Tr>(r, i, ReduceOp::sum);
    } else {
      send[r] = Guarded<typename Tr::T>(sc);
      for (std::size_t i = 0; i < sc; ++i) send[r][i] = gen<Tr>(r, i, ReduceOp::sum);
    }
  }
  auto outcomes = run_ranks(n, options_for(c), [&](RankEnv& env) {
    const int r = env.rank();
    auto ctx = env.context(make_sig(CollectiveKind::allgather, 1, sc, Tr::dt));
    const auto* in =
        c.in_place ? recv[r].data() + static_cast<std::size_t>(r) * sc : send[r].data();
    if (env.shm)
      shm_allgather(ctx, in, recv[r].data(), sc, Tr::dt);
    else
      ring_allgather(ctx, in, recv[r].data(), sc, Tr::dt);
  });
  if (auto f = failures(outcomes); !f.empty()) return f;
  for (int r = 0; r < n; ++r) {
    auto err = compare<Tr>("result", r, recv[r], 0, total, ReduceOp::sum, want);
    if (err.empty() && !c.in_place)
      err = compare<Tr>("send buffer (must be unchanged)", r, send[r], 0, sc, ReduceOp::sum,
                        [&](std::size_t i) { return gen<Tr>(r, i, ReduceOp::sum); });
    if (!err.empty()) return err;
  }
  if (auto d = guard_damage(send, "send buffer"); !d.empty()) return d;
  return guard_damage(recv, "receive buffer");
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

std::string check_allreduce(const Case& c) {
  return with_dtype(c.dtype, [&](auto tr) { return allreduce<decltype(tr)>(c); });
}
std::string check_reduce_scatter(const Case& c) {
  return with_dtype(c.dtype, [&](auto tr) { return reduce_scatter<decltype(tr)>(c); });
}
std::string check_allgather(const Case& c) {
  return with_dtype(c.dtype, [&](auto tr) { return allgather<decltype(tr)>(c); });
}
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
