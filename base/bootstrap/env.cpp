#include "base/bootstrap/env.hpp"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "base/bootstrap/net.hpp"
#include "base/bootstrap/tf_cluster.hpp"
#include "base/core/error.hpp"
#include "base/core/log.hpp"

namespace chorus {
namespace {

constexpr const char* kLookedFor =
    "CHORUS_RANK and CHORUS_WORLD_SIZE (chorusrun), OMPI_COMM_WORLD_RANK and "
    "OMPI_COMM_WORLD_SIZE (Open MPI), SLURM_PROCID and SLURM_NTASKS (Slurm), RANK and "
    "WORLD_SIZE with MASTER_ADDR and MASTER_PORT (torchrun), TF_CONFIG (TensorFlow)";

[[noreturn]] void fail(const std::string& message) {
  throw UsageError(CHORUS_ERR_BOOTSTRAP, message);
}

std::optional<int> env_int(const EnvLookup& env, const char* name) {
  auto v = env(name);
  if (!v || v->empty()) return std::nullopt;
  int value = 0;
  auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), value);
  if (ec != std::errc() || ptr != v->data() + v->size())
    fail(fmt::format("{}='{}' is not an integer", name, *v));
  return value;
}

// Stable across processes and builds, unlike std::hash.
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string env_str(const EnvLookup& env, const char* name) {
  return env(name).value_or("");
}

// "host:port" from MASTER_ADDR/MASTER_PORT plus an offset, or "" when absent.
std::string master_store(const EnvLookup& env, int port_offset) {
  std::string host = env_str(env, "MASTER_ADDR");
  auto port = env_int(env, "MASTER_PORT");
  if (host.empty() || !port) return "";
  int p = *port + port_offset;
  if (p <= 0 || p > 65535) fail(fmt::format("MASTER_PORT={} gives no valid store port", *port));
  return bootstrap::format_host_port(host, static_cast<uint16_t>(p));
}

// Foreign launchers: the store is CHORUS_STORE_ADDR or derived, hosted by rank 0.
void place_store(BootstrapInfo& info, const Config& config, const std::string& derived,
                 const std::string& how) {
  info.store_addr = !config.store_addr.empty() ? config.store_addr : derived;
  info.this_rank_hosts_store = info.rank == 0;
  if (info.store_addr.empty()) {
    if (info.world_size != 1)
      fail(fmt::format("{} job found (rank {} of {}) but no store address: set {}", info.source,
                       info.rank, info.world_size, how));
    // A job of one rank needs no rendezvous partner: a private store will do.
    info.store_addr = "127.0.0.1:0";
  }
}

std::string token_from(const Config& config, const std::string& prefix, const std::string& id) {
  if (!config.job_token.empty()) return config.job_token;
  return id.empty() ? "" : prefix + id;
}

BootstrapInfo from_chorusrun(const Config& config) {
  BootstrapInfo info;
  info.source = "chorusrun";
  info.rank = config.rank;
  info.world_size = config.world_size;
  info.local_rank = config.local_rank;
  info.local_size = config.local_size;
  info.job_token = config.job_token;
  if (info.rank < 0 || info.world_size <= 0)
    fail(fmt::format("CHORUS_RANK ({}) and CHORUS_WORLD_SIZE ({}) must both be set", config.rank,
                     config.world_size));
  info.store_addr = config.store_addr;
  if (info.store_addr.empty()) {
    if (info.world_size != 1)
      fail("CHORUS_RANK is set but CHORUS_STORE_ADDR is not; start the job with chorusrun");
    info.store_addr = "127.0.0.1:0";
    info.this_rank_hosts_store = true;
  }
  return info;
}

BootstrapInfo from_torchrun(const EnvLookup& env, const Config& config) {
  BootstrapInfo info;
  info.source = "torchrun";
  info.rank = *env_int(env, "RANK");
  info.world_size = env_int(env, "WORLD_SIZE").value_or(0);
  info.local_rank = env_int(env, "LOCAL_RANK").value_or(-1);
  info.local_size = env_int(env, "LOCAL_WORLD_SIZE").value_or(0);
  info.job_token = token_from(config, "torchrun:", env_str(env, "TORCHELASTIC_RUN_ID"));
  place_store(info, config, master_store(env, 1),
              "MASTER_ADDR and MASTER_PORT (the store uses MASTER_PORT+1) or CHORUS_STORE_ADDR");
  return info;
}

BootstrapInfo from_openmpi(const EnvLookup& env, const Config& config) {
  BootstrapInfo info;
  info.source = "openmpi";
  info.rank = *env_int(env, "OMPI_COMM_WORLD_RANK");
  info.world_size = env_int(env, "OMPI_COMM_WORLD_SIZE").value_or(0);
  info.local_rank = env_int(env, "OMPI_COMM_WORLD_LOCAL_RANK").value_or(-1);
  info.local_size = env_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE").value_or(0);
  std::string job = env_str(env, "OMPI_MCA_ess_base_jobid");
  if (job.empty()) job = env_str(env, "PMIX_NAMESPACE");
  info.job_token = token_from(config, "ompi:", job);
  place_store(info, config, master_store(env, 0),
              "CHORUS_STORE_ADDR=host:port (rank 0 hosts it) or MASTER_ADDR and MASTER_PORT");
  return info;
}

// SLURM_TASKS_PER_NODE looks like "2(x3),1": node i runs the i-th count.
std::optional<int> slurm_tasks_on_node(const std::string& spec, int node) {
  size_t pos = 0;
  int index = 0;
  while (pos < spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(pos, end - pos);
    int count = 0, repeat = 1;
    if (sscanf(item.c_str(), "%d(x%d)", &count, &repeat) < 1 || repeat < 1) return std::nullopt;
    if (node < index + repeat) return count;
    index += repeat;
    pos = end + 1;
  }
  return std::nullopt;
}

BootstrapInfo from_slurm(const EnvLookup& env, const Config& config) {
  BootstrapInfo info;
  info.source = "slurm";
  info.rank = *env_int(env, "SLURM_PROCID");
  auto ntasks = env_int(env, "SLURM_NTASKS");
  if (!ntasks) ntasks = env_int(env, "SLURM_NPROCS");
  info.world_size = ntasks.value_or(0);
  info.local_rank = env_int(env, "SLURM_LOCALID").value_or(-1);
  auto node = env_int(env, "SLURM_NODEID");
  std::string per_node = env_str(env, "SLURM_TASKS_PER_NODE");
  if (node && !per_node.empty()) info.local_size = slurm_tasks_on_node(per_node, *node).value_or(0);
  std::string job = env_str(env, "SLURM_JOB_ID");
  if (!job.empty()) job += "." + env_str(env, "SLURM_STEP_ID");
  info.job_token = token_from(config, "slurm:", job);
  place_store(info, config, master_store(env, 0),
              "CHORUS_STORE_ADDR=host:port (rank 0 hosts it) or MASTER_ADDR and MASTER_PORT");
  return info;
}

BootstrapInfo from_tf_config(const std::string& text, const Config& config) {
  using nlohmann::json;
  BootstrapInfo info;
  info.source = "tf_config";
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(fmt::format("TF_CONFIG is not valid JSON: {}", e.what()));
  }
  std::vector<std::string> members;  // rank order (base/bootstrap/tf_cluster.hpp)
  bootstrap::TfClusterShape shape;
  bootstrap::TfTask task;
  try {
    const json& cluster = j.at("cluster");
    auto tasks = [&](const char* type) {
      if (!cluster.contains(type)) return 0;
      for (const auto& a : cluster.at(type)) members.push_back(a.get<std::string>());
      return static_cast<int>(cluster.at(type).size());
    };
    shape.chiefs = tasks("chief");  // in rank order
    shape.workers = tasks("worker");
    shape.ps = tasks("ps");
    task.type = j.at("task").at("type").get<std::string>();
    task.index = j.at("task").value("index", 0);
  } catch (const json::exception& e) {
    fail(fmt::format("TF_CONFIG needs cluster.worker (or chief) address lists and task.type: {}",
                     e.what()));
  }
  if (shape.chiefs + shape.workers == 0) fail("TF_CONFIG's cluster has no chief or worker task");
  info.rank = bootstrap::tf_rank_of(shape, task);
  info.role = task.type;
  info.role_index = task.index;
  info.world_size = static_cast<int>(members.size());
  // Ranks on the same host (by address) are local to each other.
  std::string my_host = bootstrap::parse_host_port(members[info.rank]).host;
  info.local_rank = 0;
  info.local_size = 0;
  for (int r = 0; r < info.world_size; ++r) {
    if (bootstrap::parse_host_port(members[r]).host != my_host) continue;
    if (r < info.rank) ++info.local_rank;
    ++info.local_size;
  }
  info.job_token = token_from(config, "tf:", fmt::format("{:016x}", fnv1a(j["cluster"].dump())));
  place_store(info, config, members[0], "CHORUS_STORE_ADDR");
  return info;
}

void validate(const BootstrapInfo& info) {
  if (info.world_size < 1)
    fail(fmt::format("{}: world size {} must be at least 1", info.source, info.world_size));
  if (info.rank < 0 || info.rank >= info.world_size)
    fail(fmt::format("{}: rank {} is outside 0..{}", info.source, info.rank, info.world_size - 1));
  if (info.local_size > 0 && (info.local_rank < 0 || info.local_rank >= info.local_size))
    fail(fmt::format("{}: local rank {} is outside 0..{}", info.source, info.local_rank,
                     info.local_size - 1));
  bootstrap::parse_host_port(info.store_addr);  // throws naming a malformed address
}

}  // namespace

BootstrapInfo detect_bootstrap(const EnvLookup& env, const Config& config) {
  auto has = [&](const char* name) {
    auto v = env(name);
    return v && !v->empty();
  };
  BootstrapInfo info;
  if (config.rank >= 0 || config.world_size > 0)
    info = from_chorusrun(config);
  else if (has("RANK") && has("TORCHELASTIC_RUN_ID"))
    info = from_torchrun(env, config);
  else if (has("OMPI_COMM_WORLD_RANK"))
    info = from_openmpi(env, config);
  else if (has("SLURM_PROCID"))
    info = from_slurm(env, config);
  else if (has("RANK") && has("WORLD_SIZE"))
    info = from_torchrun(env, config);
  else if (has("TF_CONFIG"))
    info = from_tf_config(*env("TF_CONFIG"), config);
  else
    fail(
        fmt::format("no launcher found in the environment; looked for {}. Start the program "
                    "with chorusrun -np N, mpirun, srun or torchrun",
                    kLookedFor));
  validate(info);
  logger("bootstrap")
      .debug("bootstrap from {}: rank {} of {}, store {}{}", info.source, info.rank,
             info.world_size, info.store_addr, info.this_rank_hosts_store ? " (hosted here)" : "");
  return info;
}

}  // namespace chorus
