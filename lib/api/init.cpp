// Building a communicator: who am I (explicit config or the launcher's
// environment), the store, the transport.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "base/bootstrap/callback_store.hpp"
#include "base/bootstrap/env.hpp"
#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "base/topology/host.hpp"
#include "lib/api/handles.hpp"
#include "lib/comm/host_domain.hpp"
#include "transports/routed.hpp"
#include "transports/routes.hpp"
#include "transports/tcp/tcp_transport.hpp"
#ifdef CHORUS_HAVE_UCX
#include "transports/ucx/ucx_transport.hpp"
#endif

namespace chorus::api {
namespace {

BootstrapInfo info_from(const chorus_init_config_t& c, bool store_addr_required = true) {
  if (c.size < sizeof(chorus_init_config_t) || c.version / 100 != CHORUS_VERSION / 100)
    throw UsageError(fmt::format(
        "chorus_init_config_t of size {} / version {} does not match this library ({} / {}); "
        "start it with CHORUS_INIT_CONFIG_INITIALIZER",
        c.size, c.version, sizeof(chorus_init_config_t), CHORUS_VERSION));
  if (c.world_size <= 0 || c.rank < 0 || c.rank >= c.world_size)
    throw UsageError(
        fmt::format("rank {} is not within a world of {} ranks", c.rank, c.world_size));
  if (store_addr_required && (!c.store_addr || !*c.store_addr))
    throw UsageError("chorus_init: store_addr is required");
  BootstrapInfo info;
  info.rank = c.rank;
  info.world_size = c.world_size;
  info.store_addr = c.store_addr ? c.store_addr : "";
  info.job_token = c.job_token ? c.job_token : "";
  info.source = "chorus_init";
  return info;
}

std::string requested_transport(const chorus_init_config_t* c, const Config& config) {
  std::string name = (c && c->transport && *c->transport) ? c->transport : config.transport;
  if (name == "auto" || name == "tcp" || name == "shm" || name == "ucx") return name;
  throw UsageError(CHORUS_ERR_UNSUPPORTED,
                   fmt::format("unknown transport '{}' (auto, tcp, ucx, shm)", name));
}

// The point-to-point transport: TCP alone, or TCP as the control channel with
// UCX carrying the peers the plan routes to it.
std::unique_ptr<Transport> connect_point_to_point(Store& store, const BootstrapInfo& info,
                                                  const Config& config, const RoutePlan& plan,
                                                  const std::string& comm_prefix,
                                                  std::unique_ptr<tcp::TcpTransport> tcp) {
  if (!plan.uses_ucx) return tcp;
#ifdef CHORUS_HAVE_UCX
  ucx::UcxOptions o;
  o.rank = info.rank;
  o.size = info.world_size;
  o.token = info.job_token;
  o.key_prefix = comm_prefix + "ucx/";
  o.connect_timeout_s = config.connect_timeout_s;
  o.close_timeout_s = config.timeout_s;
  o.allow_shared_memory = plan.ucx_shared_memory;
  o.control_settles_lost_peers = true;  // TCP, below, is the control channel
  std::vector<std::unique_ptr<Transport>> transports;
  transports.push_back(std::move(tcp));
  transports.push_back(std::make_unique<ucx::UcxTransport>(store, o));
  std::vector<int> route;
  for (const auto& t : plan.peer_transport) route.push_back(t == "ucx" ? 1 : 0);
  return std::make_unique<RoutedTransport>(std::move(transports), std::move(route));
#else
  (void)store, (void)info, (void)config, (void)comm_prefix;
  throw InvariantError("UCX routes planned in a build without UCX");
#endif
}

Deadline connect_deadline(const Config& config) {
  return Deadline::after(std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(config.connect_timeout_s)));
}

// Everything after the store: the namespace of this communicator in it, the
// host map, the transports, shared memory. local_address: where this rank's
// TCP listener binds unless CHORUS_TCP_BIND_ADDR says otherwise.
chorus_comm_t build_communicator(const std::shared_ptr<Store>& store, const BootstrapInfo& info,
                                 const std::string& requested, const std::string& local_address,
                                 const Deadline& deadline) {
  const Config& config = global_config();
  // Each communicator of a job gets its own store namespace: every rank
  // initialises them in the same order, so the n-th ones of all ranks meet
  // (a counter per rank in the store, so thread ranks of one process work too).
  int64_t instance = store->add(fmt::format("instances/rank{}", info.rank), 1);
  const std::string comm_prefix = fmt::format("comm{}/", instance);
  topology::HostMap hosts =
      topology::exchange_host_map(*store, comm_prefix, info.rank, info.world_size,
                                  topology::detect_host_identity(config), deadline);
  // The CPUs this host's ranks may use between them (their affinities' union).
  const int cpus_here = hosts.cpus_on_my_host();

  tcp::TcpOptions options;
  options.rank = info.rank;
  options.size = info.world_size;
  options.token = info.job_token;
  options.bind_host = config.tcp_bind_addr.empty() ? local_address : config.tcp_bind_addr;
  options.key_prefix = comm_prefix + "tcp/";
  options.socket_buffer = config.tcp_socket_buffer;
  options.zero_copy_min = config.tcp_zero_copy_min;
  options.connect_timeout_s = config.connect_timeout_s;
  options.close_timeout_s = config.timeout_s;
  RoutePlan plan = plan_routes(hosts, requested, ucx_built());
  auto transport = connect_point_to_point(*store, info, config, plan, comm_prefix,
                                          std::make_unique<tcp::TcpTransport>(*store, options));
  if (logger("comm").should_log(spdlog::level::debug))
    for (const auto& line : plan.describe(info.rank)) logger("comm").debug("{}", line);

  CommSetup setup;
  setup.link = std::make_shared<Link>();
  setup.link->transport = std::move(transport);
  setup.link->store = store;
  setup.link->store_prefix = comm_prefix;
  setup.link->job_token = info.job_token;
  setup.link->tcp_bind_host = options.bind_host;
  setup.config = config;
  setup.hosts = hosts;
  setup.members.resize(static_cast<std::size_t>(info.world_size));
  std::iota(setup.members.begin(), setup.members.end(), 0);
  setup.cpus_on_host = cpus_here;
  setup.hosts_share_memory = plan.shm_allowed;
  setup.name = fmt::format("comm{}", instance);
  // Shared memory for this host's ranks: every collective's when they are all
  // the job's ranks, the host team's otherwise.
  if (plan.host_shm) {
    int first_here = info.rank;
    for (int r = 0; r < hosts.size(); ++r)
      if (hosts.same_host(r, info.rank)) {
        first_here = r;
        break;
      }
    setup.host_shm = join_host_domain(
        *store, config, hosts, setup.members, cpus_here, info.job_token,
        plan.shm_collectives ? comm_prefix : fmt::format("{}host{}/", comm_prefix, first_here),
        deadline);
    if (!setup.host_shm && requested == "shm")
      throw IoError(CHORUS_ERR_UNSUPPORTED,
                    "CHORUS_TRANSPORT=shm, but the shared-memory segment could not be set up "
                    "(see the warning above)");
  }
  const bool shm_collectives = plan.shm_collectives && setup.host_shm;
  logger("comm").info(
      "rank {} of {} ready ({} via {}; {} of them on this host, on {} CPUs; collectives "
      "through {}, point-to-point over {})",
      info.rank, info.world_size, info.store_addr, info.source, hosts.ranks_on_my_host(), cpus_here,
      shm_collectives ? "shared memory" : "point-to-point algorithms",
      setup.link->transport->name());

  auto handle = std::make_unique<chorus_comm>();
  handle->comm = std::make_unique<Communicator>(std::move(setup));
  chorus_comm_t raw = handle.release();
  register_comm(raw);
  return raw;
}

}  // namespace

chorus_comm_t init_communicator(const chorus_init_config_t* c) {
  const Config& config = global_config();
  BootstrapInfo info = c ? info_from(*c) : detect_bootstrap(process_env(), config);
  set_log_rank(info.rank);
  std::string requested = requested_transport(c, config);
  auto deadline = connect_deadline(config);
  std::shared_ptr<StoreHandle> store = open_store(info, deadline);
  return build_communicator(store, info, requested, store->local_address(), deadline);
}

chorus_comm_t init_communicator_with_store(const chorus_init_config_t& c,
                                           const chorus_store_ops_t& ops) {
  // The store first: it owns ops.context from here on, so every later refusal releases it.
  std::shared_ptr<Store> store = make_callback_store(ops);
  const Config& config = global_config();
  BootstrapInfo info = info_from(c, /*store_addr_required=*/false);
  info.store_addr = "the caller's store";
  info.source = "chorus_init_with_store";
  set_log_rank(info.rank);
  std::string requested = requested_transport(&c, config);
  // The peers reach this rank on its address on the route to the network
  // they share (config->store_addr); without one, loopback: one host only.
  const std::string local_address = (c.store_addr && *c.store_addr)
                                        ? local_address_towards(c.store_addr)
                                        : std::string("127.0.0.1");
  return build_communicator(store, info, requested, local_address, connect_deadline(config));
}

}  // namespace chorus::api
