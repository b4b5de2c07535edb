// Building a communicator: who am I (explicit config or the launcher's
// environment), the store, the transport.
#include <fmt/format.h>

#include <algorithm>

#include "lib/api/handles.hpp"
#include "lib/bootstrap/env.hpp"
#include "lib/core/error.hpp"
#include "lib/core/log.hpp"
#include "lib/topology/host.hpp"
#include "transports/shm/domain.hpp"
#include "transports/tcp/tcp_transport.hpp"

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
  if (name == "auto" || name == "tcp" || name == "shm") return name;
  throw UsageError(
      CHORUS_ERR_UNSUPPORTED,
      fmt::format("transport '{}' is not available in this build (auto, tcp, shm)", name));
}

// Shared-memory collectives need every rank on this host (by host identity).
bool wants_shared_memory(const std::string& requested, const topology::HostMap& hosts) {
  if (requested == "shm" && !hosts.all_on_one_host())
    throw UsageError(CHORUS_ERR_UNSUPPORTED,
                     fmt::format("CHORUS_TRANSPORT=shm needs every rank on one host, but the "
                                 "{} ranks run on {} hosts",
                                 hosts.size(), hosts.host_count()));
  return (requested == "auto" || requested == "shm") && hosts.size() > 1 && hosts.all_on_one_host();
}

shm::Layout shm_layout(const Config& config, int ranks) {
  shm::Layout layout;
  layout.ranks = ranks;
  std::size_t piece = config.shm_chunk_bytes;
  if (piece == 0) piece = std::max<std::size_t>(16 << 10, (256 << 10) / ranks / 4096 * 4096);
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
  auto transport = std::make_unique<tcp::TcpTransport>(*store, options);

  std::unique_ptr<shm::Domain> domain;
  if (wants_shared_memory(requested, hosts)) {
    shm::Domain::Options o;
    o.rank = info.rank;
    o.layout = shm_layout(config, info.world_size);
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
      "rank {} of {} ready ({} via {}; {} of them on this host; collectives "
      "through {}, point-to-point over tcp)",
      info.rank, info.world_size, info.store_addr, info.source, hosts.ranks_on_my_host(),
      domain ? "shared memory" : "the point-to-point transport");

  auto handle = std::make_unique<chorus_comm>();
  handle->comm = std::make_unique<Communicator>(std::move(transport), store, config,
                                                hosts.ranks_on_my_host(), 1, std::move(domain));
  chorus_comm_t raw = handle.release();
  register_comm(raw);
  return raw;
}

}  // namespace chorus::api
