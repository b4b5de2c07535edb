// chorus-info: what Chorus would do here.
//   chorus-info --config           every CHORUS_* variable: value, default, doc
//   chorus-info --plan [--np N] [--ranks-on-host M] [--hosts A,A,B,B]
//                                  the allreduce algorithm per size and why
//   chorus-info --transports [--np N] [--hosts A,A,B,B]
//                                  which transport each peer pair uses and why;
//                                  under chorusrun (or another launcher) the
//                                  job's real host identities, printed by rank 0:
//                                    chorusrun -np 4 chorus-info --transports
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>

#include "collectives/tuner/selection.hpp"
#include "base/bootstrap/env.hpp"
#include "base/core/config.hpp"
#include "base/core/error.hpp"
#include "base/topology/host.hpp"
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

void print_plan(const chorus::Config& config, int ranks, int ranks_on_host) {
  auto user = chorus::AlgoOverride::parse(config.algo);
  auto model = chorus::CostModel::defaults(ranks_on_host, chorus::online_cores());
  // Shared-memory collectives when every rank is here (transports/routes.hpp).
  const bool shm = ranks > 1 && ranks_on_host == ranks &&
                   (config.transport == "auto" || config.transport == "shm");
  fmt::print("allreduce plan for {} ranks ({} on this host, {} cores){}\n", ranks, ranks_on_host,
             chorus::online_cores(), user.empty() ? "" : ", with CHORUS_ALGO");
  fmt::print("{:>10}  {:<20} {:>8}  {}\n", "bytes", "algorithm", "segment", "why");
  for (std::size_t bytes = 8; bytes <= (std::size_t(1) << 30); bytes *= 4) {
    auto choice =
        chorus::choose_algorithm(chorus::CollectiveKind::allreduce, bytes, ranks, user, model, shm);
    auto segment = chorus::ring_segment_bytes(bytes, ranks, model, config.segment_bytes);
    fmt::print("{:>10}  {:<20} {:>8}  {}\n", chorus::format_bytes(bytes),
               chorus::algorithm_name(choice.algo),
               choice.algo == chorus::Algorithm::ring ? chorus::format_bytes(segment) : "-",
               choice.why());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chorus-info: configuration and algorithm plans of Chorus"};
  bool config_flag = false, plan_flag = false, transports_flag = false;
  int ranks = 2, ranks_on_host = 0;
  std::string hosts;
  app.add_flag("--config", config_flag, "Print every CHORUS_* variable with its value and doc");
  app.add_flag("--plan", plan_flag, "Print the allreduce algorithm chosen per size, and why");
  app.add_option("-n,--np,--ranks", ranks, "Ranks in the job (for --plan)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--ranks-on-host", ranks_on_host, "Ranks on this host (default: all)");
  app.add_flag("--transports", transports_flag,
               "Print which transport each peer pair uses and why (under a launcher: this job's)");
  app.add_option("--hosts", hosts,
                 "Host of each rank as comma-separated labels, e.g. a,a,b,b (--transports "
                 "without a launcher; default: all on this host)");
  CLI11_PARSE(app, argc, argv);
  try {
    const auto& config = chorus::global_config();
    if (!config_flag && !plan_flag && !transports_flag) config_flag = true;
    if (config_flag) print_config(config);
    if (transports_flag && !print_job_routes(config))
      print_routes(config, hypothetical_hosts(config, ranks, hosts),
                   hosts.empty() ? "all on this host" : "--hosts");
    if (plan_flag) print_plan(config, ranks, ranks_on_host > 0 ? ranks_on_host : ranks);
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "chorus-info: %s\n", e.what());
    return 2;
  }
  return 0;
}
