#include "tests/coll/harness.hpp"

#include <fmt/format.h>

#include <atomic>
#include <latch>
#include <map>
#include <thread>
#include <tuple>

#include "base/bootstrap/tcp_store.hpp"
#include "base/core/error.hpp"
#include "transports/inproc/inproc.hpp"
#include "transports/tcp/tcp_transport.hpp"
#ifdef CHORUS_HAVE_UCX
#include "tests/coll/ucx_world.hpp"
#endif

namespace chorus::test {

namespace {

// Worlds of thread ranks over a real transport are expensive to connect, so
// one per (transport, rank count) is kept and reused by later runs; a run that
// failed drops its world (its transports are aborted). Worlds close
// concurrently, as separate processes would.
struct World {
  std::unique_ptr<TcpStoreServer> server;
  std::vector<std::unique_ptr<TcpStoreClient>> stores;
  std::vector<std::unique_ptr<Transport>> transports;
  // Shared-memory domains over this world's ranks (one per rank), by their
  // layout's (piece, small, base piece) sizes.
  std::map<std::tuple<std::size_t, std::size_t, std::size_t>,
           std::vector<std::unique_ptr<shm::Domain>>>
      domains;
  ~World() {
    domains.clear();
    std::vector<std::thread> closers;
    for (auto& t : transports)
      if (t) closers.emplace_back([&t] { t.reset(); });
    for (auto& c : closers) c.join();
  }
};

std::map<std::pair<TransportKind, int>, std::unique_ptr<World>>& worlds() {
  static std::map<std::pair<TransportKind, int>, std::unique_ptr<World>> all;
  return all;
}

std::unique_ptr<Transport> connect_tcp(Store& store, int rank, int size) {
  tcp::TcpOptions o;
  o.rank = rank;
  o.size = size;
  o.token = "coll-test";
  o.close_timeout_s = 10;
  return std::make_unique<tcp::TcpTransport>(store, o);
}

// kind: tcp (also the control channel of shm runs) or ucx.
World& world(TransportKind kind, int n) {
  auto& slot = worlds()[{kind, n}];
  if (slot) return *slot;
  auto world = std::make_unique<World>();
  world->server = std::make_unique<TcpStoreServer>("coll-test");
  world->stores.resize(static_cast<std::size_t>(n));
  world->transports.resize(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto& store = world->stores[static_cast<std::size_t>(r)];
      store = std::make_unique<TcpStoreClient>(world->server->address(), "coll-test",
                                               Deadline::after(std::chrono::seconds(30)));
#ifdef CHORUS_HAVE_UCX
      if (kind == TransportKind::ucx) {
        world->transports[static_cast<std::size_t>(r)] = connect_ucx(*store, r, n);
        return;
      }
#endif
      world->transports[static_cast<std::size_t>(r)] = connect_tcp(*store, r, n);
    });
  for (auto& t : threads) t.join();
  slot = std::move(world);
  return *slot;
}

std::vector<std::unique_ptr<shm::Domain>>& shm_domains(World& world, int n,
                                                       const RunOptions& options) {
  auto key = std::make_tuple(options.shm_piece_bytes, options.shm_small_bytes,
                             options.shm_base_piece_bytes);
  auto& domains = world.domains[key];
  if (!domains.empty()) return domains;
  domains.resize(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      shm::Domain::Options o;
      o.rank = r;
      o.layout.ranks = n;
      o.layout.piece_bytes = std::get<0>(key);
      o.layout.small_bytes = std::get<1>(key);
      o.layout.base_piece_bytes = std::get<2>(key);
      o.name_prefix = shm::segment_name_prefix("coll-test");
      o.key_prefix =
          fmt::format("shm-{}-{}-{}/", std::get<0>(key), std::get<1>(key), std::get<2>(key));
      domains[static_cast<std::size_t>(r)] =
          shm::Domain::join(*world.stores[static_cast<std::size_t>(r)], o);
    });
  for (auto& t : threads) t.join();
  for (auto& d : domains)
    if (!d) throw IoError(CHORUS_ERR_IO, "the test's shared-memory domain could not be set up");
  return domains;
}

}  // namespace

void RankEnv::join_hosts(const std::string& hosts) {
  CHORUS_CHECK(static_cast<int>(hosts.size()) == size(), "hosts '{}' for {} ranks", hosts, size());
  std::vector<std::string> names;
  for (char h : hosts) names.emplace_back(1, h);
  const patterns::HostGroups groups = patterns::group_by_host(names);
  host = Team::of(transport, groups.hosts[static_cast<std::size_t>(groups.host_of[rank()])], 2,
                  nullptr, "host");
  hierarchy = TeamHierarchy::attach(team, *host, groups, HierarchyTags{4, 5, 6, 7}, user, model);
}

std::vector<RankOutcome> run_ranks(int n, const RunOptions& options,
                                   const std::function<void(RankEnv&)>& body) {
  bool partial = false;
  std::vector<int> ranks;
  for (int r = 0; r < n; ++r) {
    if (!options.participates || options.participates(r))
      ranks.push_back(r);
    else
      partial = true;
  }
  std::vector<std::unique_ptr<Transport>> owned;  // inproc, or TCP for partial runs
  std::vector<Transport*> transports(static_cast<std::size_t>(n));
  std::vector<shm::Domain*> domains(static_cast<std::size_t>(n), nullptr);

  // shm runs use TCP as their control channel.
  const TransportKind world_kind =
      options.transport == TransportKind::shm ? TransportKind::tcp : options.transport;
  if (options.transport == TransportKind::inproc ||
      (partial && options.transport != TransportKind::shm)) {
    // A point-to-point run where some ranks never start exercises the
    // algorithms over inproc. Over shm it needs the domains: the cached world
    // (built here for every rank) is used, and dropped below once the run
    // has failed, as a partial run does.
    auto fabric = make_inproc_fabric(n);
    for (int r = 0; r < n; ++r) {
      owned.push_back(std::make_unique<InprocTransport>(fabric, r));
      transports[static_cast<std::size_t>(r)] = owned.back().get();
    }
  } else {
    auto& w = world(world_kind, n);
    for (int r = 0; r < n; ++r)
      transports[static_cast<std::size_t>(r)] = w.transports[static_cast<std::size_t>(r)].get();
    if (options.transport == TransportKind::shm) {
      auto& shm = shm_domains(w, n, options);
      for (int r = 0; r < n; ++r)
        domains[static_cast<std::size_t>(r)] = shm[static_cast<std::size_t>(r)].get();
    }
  }
  static std::atomic<uint64_t> runs{0};
  const uint64_t seq_base = owned.empty() ? (++runs) << 20 : 0;  // fresh fabrics need none
  std::vector<RankOutcome> outcomes(static_cast<std::size_t>(n));
  std::latch done(static_cast<std::ptrdiff_t>(ranks.size()));
  std::vector<std::thread> threads;
  threads.reserve(ranks.size());
  for (int r : ranks) {
    threads.emplace_back([&, r] {
      RankOutcome& out = outcomes[static_cast<std::size_t>(r)];
      out.ran = true;
      {
        RankEnv env(*transports[static_cast<std::size_t>(r)], options,
                    domains[static_cast<std::size_t>(r)], seq_base);
        try {
          body(env);
        } catch (const Error& e) {
          out.code = e.code();
          out.message = e.what();
        } catch (const std::exception& e) {
          out.code = CHORUS_ERR_INTERNAL;
          out.message = std::string("unexpected exception: ") + e.what();
        }
        if (out.code != CHORUS_SUCCESS && options.abort_on_error) env.transport.abort(out.message);
        done.arrive_and_wait();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (owned.empty() && !failures(outcomes).empty()) worlds().erase({world_kind, n});
  return outcomes;
}

RunOptions absent_rank_run(int absent, std::chrono::milliseconds timeout) {
  RunOptions o;
  o.timeout = timeout;
  o.abort_on_error = false;  // every rank must reach its own deadline
  o.participates = [absent](int r) { return r != absent; };
  return o;
}

CallSignature make_sig(CollectiveKind kind, uint64_t seq, uint64_t count, DataType dtype,
                       ReduceOp op, int64_t root) {
  CallSignature sig;
  sig.seq = seq;
  sig.count = count;
  sig.root = root;
  sig.kind = static_cast<uint8_t>(kind);
  sig.dtype = static_cast<uint8_t>(dtype);
  sig.op = static_cast<uint8_t>(op);
  return sig;
}

std::string failures(const std::vector<RankOutcome>& outcomes) {
  std::string out;
  for (std::size_t r = 0; r < outcomes.size(); ++r) {
    const auto& o = outcomes[r];
    if (o.ran && o.code != CHORUS_SUCCESS)
      out += fmt::format("rank {}: code {}: {}\n", r, static_cast<int>(o.code), o.message);
  }
  return out;
}

}  // namespace chorus::test
