// chorus-info: what Chorus would do here.
//   chorus-info --config           every CHORUS_* variable: value, default, doc
//   chorus-info --plan [--collective C] [--np N] [--ranks-on-host M | --hosts A,A,B,B]
//                                  the algorithm per size, every candidate's
//                                  estimate or refusal, and why (--hosts: the
//                                  ranks on hosts, as a communicator across
//                                  them would choose)
//   chorus-info --transports [--np N] [--hosts A,A,B,B]
//                                  which transport each peer pair uses and why;
//                                  under chorusrun (or another launcher) the
//                                  job's real host identities, printed by rank 0:
//                                    chorusrun -np 4 chorus-info --transports
//   chorus-info --topology         this host (hwloc); under a launcher the
//                                  host map and the link classes, with the
//                                  link between hosts as the probe measured:
//                                    chorusrun -H a:2,b:2 chorus-info --topology
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "base/bootstrap/env.hpp"
#include "base/core/config.hpp"
#include "base/core/error.hpp"
#include "base/topology/host.hpp"
#include "collectives/call.hpp"
#include "collectives/patterns/hierarchy.hpp"
#include "collectives/registry.hpp"
#include "collectives/team.hpp"
#include "collectives/team_hierarchy.hpp"
#include "collectives/tuner/selection.hpp"
#include "collectives/tuner/tuning_file.hpp"
#include "lib/comm/host_domain.hpp"
#include "tools/info_topology.hpp"
#include "transports/inproc/inproc.hpp"
#include "transports/routes.hpp"

namespace {

void print_config(const chorus::Config& config) {
  for (const auto& var : chorus::config_registry()) {
    fmt::print("{:<28} = {:<12} (default {})\n    {}\n", var.name, var.show(config),
               var.default_value, var.doc);
  }
}

// Host identity per rank: the labels given (--hosts), else every rank here.
chorus::topology::HostMap hypothetical_hosts(const chorus::Config& config, int ranks,
                                             const std::string& labels) {
  chorus::topology::HostMap map;
  std::string here = chorus::topology::detect_host_identity(config);
  std::size_t start = 0;
  for (int r = 0; r < ranks; ++r) {
    if (labels.empty()) {
      map.host_of_rank.push_back(here);
      continue;
    }
    std::size_t comma = labels.find(',', start);
    if (start > labels.size())
      throw chorus::UsageError(fmt::format("--hosts names {} hosts for {} ranks", r, ranks));
    map.host_of_rank.push_back(labels.substr(start, comma - start));
    start = comma == std::string::npos ? labels.size() + 1 : comma + 1;
  }
  return map;
}

void print_routes(const chorus::Config& config, chorus::topology::HostMap hosts,
                  const std::string& source) {
  fmt::print(
      "transports for {} ranks on {} host(s) ({}; CHORUS_TRANSPORT={}, UCX {}in this "
      "build)\n",
      hosts.size(), hosts.host_count(), source, config.transport,
      chorus::ucx_built() ? "" : "not ");
  for (int r = 0; r < hosts.size(); ++r) fmt::print("  rank {}: {}\n", r, hosts.host_of_rank[r]);
  bool first = true;
  for (int r = 0; r < hosts.size(); ++r) {
    hosts.rank = r;
    auto plan = chorus::plan_routes(hosts, config.transport, chorus::ucx_built());
    auto lines = plan.describe(r);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i == 0 && !first) continue;  // the collectives line is the same for every rank
      fmt::print("{}\n", lines[i]);
    }
    first = false;
  }
}

// Under a launcher: every rank publishes its host identity; rank 0 prints.
bool print_job_routes(const chorus::Config& config) {
  chorus::BootstrapInfo info;
  try {
    info = chorus::detect_bootstrap(chorus::process_env(), config);
  } catch (const chorus::Error&) {
    return false;  // not started by a launcher
  }
  auto deadline = chorus::Deadline::after(std::chrono::seconds(60));
  auto store = chorus::open_store(info, deadline);
  auto hosts =
      chorus::topology::exchange_host_map(*store, "chorus-info/", info.rank, info.world_size,
                                          chorus::topology::detect_host_identity(config), deadline);
  if (info.rank == 0) print_routes(config, hosts, "host identities of this job via " + info.source);
  // Rank 0 hosts nothing here, but every rank waits until rank 0 has read all.
  store->set(fmt::format("chorus-info/done/{}", info.rank), "1");
  std::vector<std::string> keys;
  for (int r = 0; r < info.world_size; ++r) keys.push_back(fmt::format("chorus-info/done/{}", r));
  store->wait(keys, deadline);
  return true;
}

// The plan of one collective per size: the algorithm chosen and why, and
// every candidate's estimate or refusal, for `ranks` ranks of which
// `ranks_on_host` share this host, or placed on hosts by `labels` (--hosts):
// then the world has the hierarchy a communicator would give it, as rank 0
// sees it (no choice depends on the rank).
void print_plan(const chorus::Config& config, const std::string& collective, int ranks,
                int ranks_on_host, const std::string& labels) {
  using namespace chorus;
  CollectiveCall call;
  for (int k = 1; k < kCollectiveKinds; ++k)
    if (collective_name(static_cast<CollectiveKind>(k)) == collective)
      call.kind = static_cast<CollectiveKind>(k);
  if (call.kind == CollectiveKind::none || call.kind == CollectiveKind::send)
    throw UsageError(fmt::format("--collective: unknown collective '{}'", collective));
  auto user = user_choices(config);
  patterns::HostGroups groups;
  if (!labels.empty()) {
    groups = patterns::group_by_host(hypothetical_hosts(config, ranks, labels).host_of_rank);
    ranks_on_host = static_cast<int>(groups.hosts.front().size());
  }
  const bool hosts = groups.host_count() > 1;
  int widest = ranks_on_host;
  for (const auto& h : groups.hosts) widest = std::max(widest, static_cast<int>(h.size()));
  auto model = CostModel::defaults(widest, online_cores());
  model.set_network(config.net_alpha_us, config.net_gbps);
  // Shared memory when every rank is here and allowed (transports/routes.hpp).
  const bool shm = ranks > 1 && ranks_on_host == ranks &&
                   (config.transport == "auto" || config.transport == "shm");
  const shm::Layout layout = host_shm_layout(config, ranks, online_cores());
  Team team;
  for (int r = 0; r < ranks; ++r) team.members.push_back(r);
  team.shm_layout = shm ? &layout : nullptr;
  // Across hosts: rank 0's teams over an in-process transport (never used).
  InprocTransport transport(make_inproc_fabric(ranks), 0);
  std::optional<Team> local;
  std::unique_ptr<TeamHierarchy> hierarchy;
  const shm::Layout host_layout = host_shm_layout(config, ranks_on_host, online_cores());
  const shm::Layout widest_layout = host_shm_layout(config, widest, online_cores());
  if (hosts) {
    team = Team::whole(transport, 1);
    local = Team::of(transport, groups.hosts.front(), 2, nullptr, "host");
    const bool shm_allowed = config.transport == "auto" || config.transport == "shm";
    if (ranks_on_host > 1 && shm_allowed) local->shm_layout = &host_layout;
    hierarchy = TeamHierarchy::attach(team, *local, groups, HierarchyTags{4, 5, 6, 7}, user, model,
                                      shm_allowed && widest > 1 ? &widest_layout : nullptr);
  }
  fmt::print("{} plan for {} ranks ({} on {}, {} cores{}){}{}\n", collective, ranks, ranks_on_host,
             hosts ? fmt::format("rank 0's host of {}", groups.host_count()) : "this host",
             online_cores(),
             shm ? fmt::format("; shared memory: all {} ranks share this host", ranks) : "",
             config.algo.empty() ? "" : ", with CHORUS_ALGO",
             config.tuning_file.empty() ? "" : ", with CHORUS_TUNING_FILE");
  auto algos = algorithms_for(call.kind);
  fmt::print("{:>10}  {:<20} {:>8}", "bytes", "chosen", "segment");
  for (const AlgorithmSpec* a : algos) fmt::print("  {:>20}", a->name);
  fmt::print("\n");
  for (std::size_t bytes = 8; bytes <= (std::size_t(1) << 30); bytes *= 4) {
    Selection s = select_algorithm(call, bytes, team, user, model, true);
    auto segment = ring_segment_bytes(bytes, ranks, model, config.segment_bytes);
    fmt::print("{:>10}  {:<20} {:>8}", format_bytes(bytes),
               s.choice ? s.choice->name() : std::string(s.spec->name),
               s.spec->name == "ring" ? format_bytes(segment) : "-");
    for (const auto& c : s.candidates)
      fmt::print("  {:>20}",
                 c.refusal ? std::string("refused") : fmt::format("{:.1f} us", c.estimate_us));
    fmt::print("  {}\n", s.forced             ? fmt::format("CHORUS_ALGO chose {}", s.spec->name)
                         : s.tuned            ? fmt::format("tuning file chose {}", s.spec->name)
                         : s.refused_override ? fmt::format("CHORUS_ALGO chose {}, which refused",
                                                            s.refused_override->name)
                                              : std::string("cheapest estimate"));
  }
  for (const AlgorithmSpec* a : algos) {
    const char* refusal = a->refusal(team, call);
    fmt::print("  {}: {}{}\n", a->name, a->summary,
               refusal ? fmt::format(" [refused here: {}]", refusal) : "");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chorus-info: configuration and algorithm plans of Chorus"};
  bool config_flag = false, plan_flag = false, transports_flag = false, topology_flag = false;
  int ranks = 2, ranks_on_host = 0;
  std::string hosts, collective = "allreduce";
  app.add_flag("--config", config_flag, "Print every CHORUS_* variable with its value and doc");
  app.add_flag("--plan", plan_flag,
               "Print the algorithm chosen per size, every candidate's estimate, and why");
  app.add_option("--collective", collective, "The collective of --plan (default allreduce)");
  app.add_option("-n,--np,--ranks", ranks, "Ranks in the job (for --plan)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--ranks-on-host", ranks_on_host, "Ranks on this host (default: all)");
  app.add_flag("--transports", transports_flag,
               "Print which transport each peer pair uses and why (under a launcher: this job's)");
  app.add_flag("--topology", topology_flag,
               "Print this host (hwloc); under a launcher the job's hosts, their leaders and "
               "the link classes (the link between hosts as probed at init)");
  app.add_option("--hosts", hosts,
                 "Host of each rank as comma-separated labels, e.g. a,a,b,b (--plan, and "
                 "--transports without a launcher; default: all on this host)");
  CLI11_PARSE(app, argc, argv);
  try {
    const auto& config = chorus::global_config();
    if (!config_flag && !plan_flag && !transports_flag && !topology_flag) config_flag = true;
    if (config_flag) print_config(config);
    if (transports_flag && !print_job_routes(config))
      print_routes(config, hypothetical_hosts(config, ranks, hosts),
                   hosts.empty() ? "all on this host" : "--hosts");
    if (topology_flag) chorus::info::print_topology(config);
    if (plan_flag)
      print_plan(config, collective, ranks, ranks_on_host > 0 ? ranks_on_host : ranks, hosts);
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "chorus-info: %s\n", e.what());
    return 2;
  }
  return 0;
}
