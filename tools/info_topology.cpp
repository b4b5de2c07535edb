// chorus-info --topology: this host through hwloc; inside a job also the
// host map (each host's ranks, its leader, its machine) and the two link
// classes with the values the job's cost model uses: the same host (the
// shared-memory and point-to-point model) and another host (probed at init
// between the host leaders, or configured).
#include "tools/info_topology.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/bootstrap/env.hpp"
#include "base/core/error.hpp"
#include "base/topology/machine.hpp"
#include "collectives/tuner/cost_model.hpp"
#include "lib/api/handles.hpp"
#include "lib/comm/link_probe.hpp"

namespace chorus::info {
namespace {

// GB/s of a cost model's microseconds per byte.
double gb_per_s(double us_per_byte) {
  return us_per_byte > 0 ? 1e-3 / us_per_byte : 0;
}

void print_same_host(const CostModel& model) {
  fmt::print("link classes\n");
  fmt::print(
      "  same host: shared memory alpha {:.2f} us, {:.1f} GB/s; point-to-point alpha {:.1f} us, "
      "{:.1f} GB/s (cost model defaults{})\n",
      model.shm_alpha_us, gb_per_s(model.shm_us_per_byte), model.alpha_us,
      gb_per_s(model.us_per_byte), model.oversubscribed ? ", ranks outnumber cores" : "");
}

void print_other_host(const NetworkLink& n) {
  fmt::print("  other host: alpha {:.1f} us, {:.3f} Gbit/s ({}", n.alpha_us, n.gbps, n.source);
  if (n.probe_ms > 0) fmt::print(" among {} hosts in {:.1f} ms", n.hosts, n.probe_ms);
  fmt::print(")\n");
}

// Rank 0 prints the job's hosts: leaders publish their machine in the store.
void print_job(Communicator& comm) {
  const topology::HostMap& hosts = comm.hosts();
  Store& store = *comm.link().store;
  const std::string prefix = comm.link().store_prefix + "chorus-info/machine/";
  const bool leader = comm.leaders() != nullptr;
  if (leader)
    store.set(prefix + std::to_string(comm.rank()),
              nlohmann::json(topology::detect_machine()).dump());
  if (comm.rank() == 0) {
    const auto deadline = Deadline::after(std::chrono::seconds(30));
    fmt::print("{} rank(s) on {} host(s)\n", hosts.size(), hosts.host_count());
    for (int r = 0; r < hosts.size(); ++r) {
      bool first = true;
      for (int q = 0; q < r && first; ++q) first = !hosts.same_host(q, r);
      if (!first) continue;
      std::string ranks;
      for (int q = r; q < hosts.size(); ++q)
        if (hosts.same_host(q, r)) ranks += (ranks.empty() ? "" : ",") + std::to_string(q);
      fmt::print("host {}\n  ranks {}; leader rank {}\n", hosts.host_of_rank[r], ranks, r);
      const auto machine = nlohmann::json::parse(store.get(prefix + std::to_string(r), deadline))
                               .get<topology::MachineInfo>();
      fmt::print("{}", machine.describe("  "));
    }
    print_same_host(comm.cost_model());
    if (hosts.host_count() > 1)
      print_other_host(comm.network());
    else
      fmt::print("  other host: none in this job (would use alpha {:.1f} us, {:.3f} Gbit/s: {})\n",
                 comm.network().alpha_us, comm.network().gbps, comm.network().source);
  }
  // Every rank: what its cost model uses between hosts (the same everywhere).
  const NetworkLink& n = comm.network();
  fmt::print("rank {}: other host alpha_us={:.17g} gbps={:.17g} source={} probe_ms={:.1f}\n",
             comm.rank(), n.alpha_us, n.gbps, n.source, n.probe_ms);
  std::fflush(stdout);
}

}  // namespace

void print_topology(const Config& config) {
  bool in_job = true;
  try {
    (void)detect_bootstrap(process_env(), config);
  } catch (const Error&) {
    in_job = false;  // not started by a launcher
  }
  if (!in_job) {
    fmt::print("{}", topology::detect_machine().describe());
    print_same_host(CostModel::defaults(1, online_cores()));
    print_other_host(configured_network(config));
    fmt::print(
        "  (the link between hosts is probed inside a job across hosts: chorusrun -H ...)\n");
    return;
  }
  chorus_comm_t handle = api::init_communicator(nullptr);
  try {
    print_job(api::lookup(handle));
  } catch (...) {
    chorus_comm_destroy(handle);
    throw;
  }
  if (chorus_comm_destroy(handle) != CHORUS_SUCCESS)
    throw IoError(CHORUS_ERR_IO, "chorus_comm_destroy failed");
}

}  // namespace chorus::info
