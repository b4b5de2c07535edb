// Checks of the collectives that run through the algorithm registry (reduce,
// gather, scatter, alltoall, allgatherv, reduce_scatterv): every rank's
// result against values.hpp's reference, buffers a rank must not write
// checked unchanged, guard zones around everything.
#include <fmt/format.h>

#include <cstring>

#include "base/core/error.hpp"
#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/shm/domain.hpp"
#include "collectives/team.hpp"
#include "tests/coll/check_util.hpp"

namespace chorus::test {

void run_registered(RankEnv& env, const CollectiveCall& call, std::string_view algo) {
  if (algo.empty()) algo = env.shm ? "shm" : "ring";
  const AlgorithmSpec* spec = find_algorithm(call.kind, algo);
  if (!spec)
    throw InvariantError(fmt::format("no algorithm {} for {}", algo, collective_name(call.kind)));
  if (const char* why = spec->refusal(env.team, call))
    throw InvariantError(fmt::format("{} refuses: {}", algo, why));
  const CallShape shape = validate(call, env.rank(), env.size());
  CallSignature sig = signature_of(call, env.size(), shape);
  sig.seq = 1;
  sig.algo = algorithm_id(*spec);
  auto ctx = env.context(sig);
  spec->run(ctx, call, shape);
}

namespace {

CollectiveCall make(CollectiveKind kind, const void* send, void* recv, const Case& c) {
  CollectiveCall call;
  call.kind = kind;
  call.send = send;
  call.recv = recv;
  call.count = c.count;
  call.dtype = c.dtype;
  call.op = c.op;
  call.root = c.root;
  return call;
}

std::vector<std::size_t> offsets_of(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> out(counts.size());
  for (std::size_t r = 1; r < counts.size(); ++r) out[r] = out[r - 1] + counts[r - 1];
  return out;
}

template <typename Tr>
using T_ = typename Tr::T;

// reduce (to c.root), or allreduce (all: every rank receives the result).
template <typename Tr>
std::string reduce(const Case& c, bool all) {
  const int n = c.ranks;
  auto receives = [&](int r) { return all || r == c.root; };
  std::vector<T_<Tr>> want(c.count);
  for (std::size_t i = 0; i < c.count; ++i) want[i] = reference<Tr>(n, i, c.op);
  Buffers<Tr> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    send[r] = Guarded<T_<Tr>>(c.count);
    for (std::size_t i = 0; i < c.count; ++i) send[r][i] = gen<Tr>(r, i, c.op);
    if (c.in_place || !receives(r)) continue;
    recv[r] = Guarded<T_<Tr>>(c.count);
    for (std::size_t i = 0; i < c.count; ++i) recv[r][i] = unlike(want[i]);
  }
  auto outcomes = run_ranks(n, options_for(c), [&](RankEnv& env) {
    const int r = env.rank();
    void* out = !receives(r) ? nullptr : c.in_place ? send[r].data() : recv[r].data();
    auto call =
        make(all ? CollectiveKind::allreduce : CollectiveKind::reduce, send[r].data(), out, c);
    if (all) call.root = -1;
    run_registered(env, call, c.algorithm);
  });
  if (auto f = failures(outcomes); !f.empty()) return f;
  std::string err;
  for (int r = 0; r < n && err.empty(); ++r) {
    if (receives(r))
      err = compare<Tr>("result", r, c.in_place ? send[r] : recv[r], 0, c.count, c.op,
                        [&](std::size_t i) { return want[i]; });
    if (err.empty() && (!receives(r) || !c.in_place))
      err = compare<Tr>("send buffer (must be unchanged)", r, send[r], 0, c.count, ReduceOp::sum,
                        [&](std::size_t i) { return gen<Tr>(r, i, c.op); });
  }
  if (!err.empty()) return err;
  if (auto d = guard_damage(send, "send buffer"); !d.empty()) return d;
  return guard_damage(recv, "receive buffer");
}

template <typename Tr>
std::string gather(const Case& c) {
  const int n = c.ranks;
  const std::size_t total = c.count * static_cast<std::size_t>(n);
  auto want = [&](std::size_t i) {
    return gen<Tr>(static_cast<int>(i / c.count), i % c.count, ReduceOp::sum);
  };
  Buffers<Tr> send(n), recv(n);
  recv[c.root] = Guarded<T_<Tr>>(total);
  for (std::size_t i = 0; i < total; ++i) recv[c.root][i] = unlike(want(i));
  for (int r = 0; r < n; ++r) {
    send[r] = Guarded<T_<Tr>>(c.count);
    for (std::size_t i = 0; i < c.count; ++i) send[r][i] = gen<Tr>(r, i, ReduceOp::sum);
  }
  const std::size_t own = static_cast<std::size_t>(c.root) * c.count;
  if (c.in_place)
    for (std::size_t i = 0; i < c.count; ++i) recv[c.root][own + i] = send[c.root][i];
  auto outcomes = run_ranks(n, options_for(c), [&](RankEnv& env) {
    const int r = env.rank();
    const void* in = r == c.root && c.in_place ? recv[r].data() + own : send[r].data();
    void* out = r == c.root ? recv[r].data() : nullptr;
    run_registered(env, make(CollectiveKind::gather, in, out, c), c.algorithm);
  });
  if (auto f = failures(outcomes); !f.empty()) return f;
  auto err = compare<Tr>("root's result", c.root, recv[c.root], 0, total, ReduceOp::sum, want);
  for (int r = 0; r < n && err.empty(); ++r)
    err = compare<Tr>("send buffer (must be unchanged)", r, send[r], 0, c.count, ReduceOp::sum,
                      [&](std::size_t i) { return gen<Tr>(r, i, ReduceOp::sum); });
  if (!err.empty()) return err;
  if (auto d = guard_damage(send, "send buffer"); !d.empty()) return d;
  return guard_damage(recv, "receive buffer");
}

template <typename Tr>
std::string scatter(const Case& c) {
  const int n = c.ranks;
  const std::size_t total = c.count * static_cast<std::size_t>(n);
  // Block q of the root's buffer: what rank q must end with.
  auto block = [&](int q, std::size_t i) { return gen<Tr>(q, i, ReduceOp::sum); };
  Buffers<Tr> send(n), recv(n);
  send[c.root] = Guarded<T_<Tr>>(total);
  for (std::size_t i = 0; i < total; ++i)
    send[c.root][i] = block(static_cast<int>(i / c.count), i % c.count);
  for (int r = 0; r < n; ++r) {
    if (r == c.root && c.in_place) continue;
    recv[r] = Guarded<T_<Tr>>(c.count);
    for (std::size_t i = 0; i < c.count; ++i) recv[r][i] = unlike(block(r, i));
  }
  const std::size_t own = static_cast<std::size_t>(c.root) * c.count;
  auto outcomes = run_ranks(n, options_for(c), [&](RankEnv& env) {
    const int r = env.rank();
    const void* in = r == c.root ? send[r].data() : nullptr;
    void* out = r == c.root && c.in_place ? send[r].data() + own : recv[r].data();
    run_registered(env, make(CollectiveKind::scatter, in, out, c), c.algorithm);
  });
  if (auto f = failures(outcomes); !f.empty()) return f;
  std::string err = compare<Tr>(
      "root's send buffer (must be unchanged)", c.root, send[c.root], 0, total, ReduceOp::sum,
      [&](std::size_t i) { return block(static_cast<int>(i / c.count), i % c.count); });
  for (int r = 0; r < n && err.empty(); ++r) {
    if (r == c.root && c.in_place) continue;
    err = compare<Tr>("result", r, recv[r], 0, c.count, ReduceOp::sum,
                      [&](std::size_t i) { return block(r, i); });
  }
  if (!err.empty()) return err;
  if (auto d = guard_damage(send, "send buffer"); !d.empty()) return d;
  return guard_damage(recv, "receive buffer");
}

template <typename Tr>
std::string alltoall(const Case& c) {
  const int n = c.ranks;
  const std::size_t total = c.count * static_cast<std::size_t>(n);
  // What rank `from` sends to rank `to`, element i.
  auto piece = [&](int from, int to, std::size_t i) {
    return gen<Tr>(from, static_cast<std::size_t>(to) * c.count + i, ReduceOp::sum);
  };
  Buffers<Tr> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    send[r] = Guarded<T_<Tr>>(total);
    recv[r] = Guarded<T_<Tr>>(total);
    for (std::size_t i = 0; i < total; ++i) {
      send[r][i] = piece(r, static_cast<int>(i / c.count), i % c.count);
      recv[r][i] = unlike(piece(static_cast<int>(i / c.count), r, i % c.count));
    }
  }
  auto outcomes = run_ranks(n, options_for(c), [&](RankEnv& env) {
    const int r = env.rank();
    run_registered(env, make(CollectiveKind::alltoall, send[r].data(), recv[r].data(), c),
                   c.algorithm);
  });
  if (auto f = failures(outcomes); !f.empty()) return f;
  std::string err;
  for (int r = 0; r < n && err.empty(); ++r) {
    err = compare<Tr>("result", r, recv[r], 0, total, ReduceOp::sum, [&](std::size_t i) {
      return piece(static_cast<int>(i / c.count), r, i % c.count);
    });
    if (err.empty())
      err = compare<Tr>(
          "send buffer (must be unchanged)", r, send[r], 0, total, ReduceOp::sum,
          [&](std::size_t i) { return piece(r, static_cast<int>(i / c.count), i % c.count); });
  }
  if (!err.empty()) return err;
  if (auto d = guard_damage(send, "send buffer"); !d.empty()) return d;
  return guard_damage(recv, "receive buffer");
}

// allgatherv (v: counts_for's uneven blocks), or allgather (every block c.count).
template <typename Tr>
std::string allgatherv(const Case& c, bool v) {
  const int n = c.ranks;
  const auto counts =
      v ? counts_for(n, c.count) : std::vector<std::size_t>(std::size_t(n), c.count);
  const auto offsets = offsets_of(counts);
  const std::size_t total = offsets.back() + counts.back();
  auto owner = [&](std::size_t i) {
    int q = n - 1;
    while (offsets[static_cast<std::size_t>(q)] > i || counts[static_cast<std::size_t>(q)] == 0)
      --q;
    return q;
  };
  auto want = [&](std::size_t i) {
    const int q = owner(i);
    return gen<Tr>(q, i - offsets[static_cast<std::size_t>(q)], ReduceOp::sum);
  };
  Buffers<Tr> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    const std::size_t mine = counts[static_cast<std::size_t>(r)],
                      at = offsets[static_cast<std::size_t>(r)];
    recv[r] = Guarded<T_<Tr>>(total);
    for (std::size_t i = 0; i < total; ++i) recv[r][i] = unlike(want(i));
    send[r] = Guarded<T_<Tr>>(mine);
    for (std::size_t i = 0; i < mine; ++i) send[r][i] = gen<Tr>(r, i, ReduceOp::sum);
    if (c.in_place)
      for (std::size_t i = 0; i < mine; ++i) recv[r][at + i] = send[r][i];
  }
  auto outcomes = run_ranks(n, options_for(c), [&](RankEnv& env) {
    const int r = env.rank();
    const void* in =
        c.in_place ? recv[r].data() + offsets[static_cast<std::size_t>(r)] : send[r].data();
    auto call =
        make(v ? CollectiveKind::allgatherv : CollectiveKind::allgather, in, recv[r].data(), c);
    if (v) call.counts = counts.data();
    run_registered(env, call, c.algorithm);
  });
  if (auto f = failures(outcomes); !f.empty()) return f;
  for (int r = 0; r < n; ++r)
    if (auto err = compare<Tr>("result", r, recv[r], 0, total, ReduceOp::sum, want); !err.empty())
      return err;
  if (auto d = guard_damage(send, "send buffer"); !d.empty()) return d;
  return guard_damage(recv, "receive buffer");
}

// reduce_scatterv (v: counts_for's uneven blocks), or reduce_scatter (every
// block c.count).
template <typename Tr>
std::string reduce_scatterv(const Case& c, bool v) {
  const int n = c.ranks;
  const auto counts =
      v ? counts_for(n, c.count) : std::vector<std::size_t>(std::size_t(n), c.count);
  const auto offsets = offsets_of(counts);
  const std::size_t total = offsets.back() + counts.back();
  Buffers<Tr> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    const std::size_t mine = counts[static_cast<std::size_t>(r)],
                      at = offsets[static_cast<std::size_t>(r)];
    send[r] = Guarded<T_<Tr>>(total);
    for (std::size_t i = 0; i < total; ++i) send[r][i] = gen<Tr>(r, i, c.op);
    if (c.in_place) continue;
    recv[r] = Guarded<T_<Tr>>(mine);
    for (std::size_t i = 0; i < mine; ++i) recv[r][i] = unlike(reference<Tr>(n, at + i, c.op));
  }
  auto outcomes = run_ranks(n, options_for(c), [&](RankEnv& env) {
    const int r = env.rank();
    void* out = c.in_place ? send[r].data() + offsets[static_cast<std::size_t>(r)] : recv[r].data();
    auto call = make(v ? CollectiveKind::reduce_scatterv : CollectiveKind::reduce_scatter,
                     send[r].data(), out, c);
    if (v) call.counts = counts.data();
    run_registered(env, call, c.algorithm);
  });
  if (auto f = failures(outcomes); !f.empty()) return f;
  for (int r = 0; r < n; ++r) {
    const std::size_t mine = counts[static_cast<std::size_t>(r)],
                      at = offsets[static_cast<std::size_t>(r)];
    const auto& out = c.in_place ? send[r] : recv[r];
    auto err = compare<Tr>("result", r, out, c.in_place ? at : 0, mine, c.op,
                           [&](std::size_t i) { return reference<Tr>(n, at + i, c.op); });
    if (err.empty())
      err = compare<Tr>("send buffer (must be unchanged)", r, send[r], 0, total, ReduceOp::sum,
                        [&](std::size_t i) {
                          const bool own = c.in_place && i >= at && i < at + mine;
                          return own ? send[r][i] : gen<Tr>(r, i, c.op);
                        });
    if (!err.empty()) return err;
  }
  if (auto d = guard_damage(send, "send buffer"); !d.empty()) return d;
  return guard_damage(recv, "receive buffer");
}

}  // namespace

std::vector<std::size_t> counts_for(int ranks, std::size_t base) {
  std::vector<std::size_t> counts(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    counts[static_cast<std::size_t>(r)] =
        base == 0 || r % 3 == 1 ? 0 : base + static_cast<std::size_t>(r);
  return counts;
}

std::vector<std::string_view> runnable_algorithms(CollectiveKind kind) {
  // A team on one host, with a shared-memory domain in coll_tests_shm: the
  // algorithms for teams across hosts refuse it everywhere.
  static const shm::Layout layout;
  Team one_host;
  one_host.members = {0, 1};
  if (default_transport() == TransportKind::shm) one_host.shm_layout = &layout;
  CollectiveCall call;
  call.kind = kind;
  std::vector<std::string_view> out;
  for (const AlgorithmSpec* spec : algorithms_for(kind))
    if (spec->refusal(one_host, call) == nullptr) out.push_back(spec->name);
  return out;
}

std::string check_reduce(const Case& c) {
  return with_dtype(c.dtype, [&](auto tr) { return reduce<decltype(tr)>(c, false); });
}
std::string check_allreduce(const Case& c) {
  Case with_algo = c;
  if (c.recursive_doubling && c.algorithm.empty()) with_algo.algorithm = "recursive_doubling";
  return with_dtype(c.dtype, [&](auto tr) { return reduce<decltype(tr)>(with_algo, true); });
}
std::string check_gather(const Case& c) {
  return with_dtype(c.dtype, [&](auto tr) { return gather<decltype(tr)>(c); });
}
std::string check_scatter(const Case& c) {
  return with_dtype(c.dtype, [&](auto tr) { return scatter<decltype(tr)>(c); });
}
std::string check_alltoall(const Case& c) {
  return with_dtype(c.dtype, [&](auto tr) { return alltoall<decltype(tr)>(c); });
}
std::string check_allgatherv(const Case& c) {
  return with_dtype(c.dtype, [&](auto tr) { return allgatherv<decltype(tr)>(c, true); });
}
std::string check_reduce_scatterv(const Case& c) {
  return with_dtype(c.dtype, [&](auto tr) { return reduce_scatterv<decltype(tr)>(c, true); });
}
std::string check_allgather(const Case& c) {
  return with_dtype(c.dtype, [&](auto tr) { return allgatherv<decltype(tr)>(c, false); });
}
std::string check_reduce_scatter(const Case& c) {
  return with_dtype(c.dtype, [&](auto tr) { return reduce_scatterv<decltype(tr)>(c, false); });
}

}  // namespace chorus::test
