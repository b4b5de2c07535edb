// Building a communicator: who am I (explicit config or the launcher's
// environment), the store, the transport.
#include <fmt/format.h>

#include <algorithm>

#include "lib/api/handles.hpp"
#include "base/bootstrap/env.hpp"
#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "base/topology/host.hpp"
#include "transports/routed.hpp"
#include "transports/routes.hpp"
#include "collectives/shm/domain.hpp"
#include "transports/tcp/tcp_transport.hpp"
#ifdef CHORUS_HAVE_UCX
#include "transports/ucx/ucx_transport.hpp"
#endif

namespace chorus::api {
namespace {

BootstrapInfo info_from(const chorus_init_config_t& c) {
  if (c.size < sizeof(chorus_init_config_t) || c.version / 100 != CHORUS_VERSION / 100)
    throw UsageError(fmt::format(
        "chorus_init_config_t of size {} / version {} does not match this library ({} / {}); "
        "start it with CHORUS_INIT_CONFIG_INITIALIZER",
        c.size, c.version, sizeof(chorus_init_config_t), CHORUS_VERSION));
  if (c.world_size <= 0 || c.rank < 0 || c.rank >= c.world_size)
    throw UsageError(
        fmt::format("rank {} is not within a world of {} ranks", c.rank, c.world_size));
  if (!c.store_addr || !*c.store_addr) throw UsageError("chorus_init: store_addr is required");
  BootstrapInfo info;
  info.rank = c.rank;
  info.world_size = c.world_size;
  info.store_addr = c.store_addr;
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

shm::Layout shm_layout(const Config& config, int ranks, int cores) {
  shm::Layout layout;
  layout.ranks = ranks;
  std::size_t piece = config.shm_chunk_bytes;
  if (piece == 0) {
    // A round's slot (ranks x piece) of 256K stays in cache. With more ranks
    // than cores every round has every rank scheduled a few times: 512K
    // (measured at 8 ranks on 2 cores: 2.4-2.8 GB/s at 16M against 1.8-2.1
    // with 1M slots; 4 ranks within noise).
    std::size_t slot = ranks > cores ? (512 << 10) : (256 << 10);
    piece = std::max<std::size_t>(16 << 10, slot / static_cast<std::size_t>(ranks) / 4096 * 4096);
  }
  layout.piece_bytes = piece;
  layout.small_bytes = config.shm_small_max;
  return layout;
}

}  // namespace

chorus_comm_t init_communicator(const chorus_init_config_t* c) {
  const Config& config = global_config();
  BootstrapInfo info = c ? info_from(*c) : detect_bootstrap(process_env(), config);
  set_log_rank(info.rank);
  std::string requested = requested_transport(c, config);
  auto deadline = Deadline::after(std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(config.connect_timeout_s)));
  std::shared_ptr<StoreHandle> store = open_store(info, deadline);
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
  options.bind_host = config.tcp_bind_addr.empty() ? store->local_address() : config.tcp_bind_addr;
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

  std::unique_ptr<shm::Domain> domain;
  if (plan.shm_collectives) {
    shm::Domain::Options o;
    o.rank = info.rank;
    o.layout = shm_layout(config, info.world_size, cpus_here);
    // Spinning (by yielding when ranks outnumber cores, which lets the awaited
    // rank run) beats a futex wake-up on every shared-memory wait.
    o.spin_us = resolve_spin_us(config.spin_us);
    o.oversubscribed = hosts.ranks_on_my_host() > cpus_here;
    o.name_prefix = shm::segment_name_prefix(info.job_token);
    o.key_prefix = comm_prefix;
    o.deadline = deadline;
    domain = shm::Domain::join(*store, o);
    if (!domain && requested == "shm")
      throw IoError(CHORUS_ERR_UNSUPPORTED,
                    "CHORUS_TRANSPORT=shm, but the shared-memory segment could not be set up "
                    "(see the warning above)");
  }
  logger("comm").info(
      "rank {} of {} ready ({} via {}; {} of them on this host, on {} CPUs; collectives "
      "through {}, point-to-point over {})",
      info.rank, info.world_size, info.store_addr, info.source, hosts.ranks_on_my_host(), cpus_here,
      domain ? "shared memory" : "point-to-point algorithms", transport->name());

  auto handle = std::make_unique<chorus_comm>();
  handle->comm =
      std::make_unique<Communicator>(std::move(transport), store, config, hosts.ranks_on_my_host(),
                                     cpus_here, 1, std::move(domain));
  chorus_comm_t raw = handle.release();
  register_comm(raw);
  return raw;
}

}  // namespace chorus::api
