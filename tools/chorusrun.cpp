// chorusrun: starts the ranks of a Chorus job on this machine or across hosts.
//
//   chorusrun -np N [--tag-output] [--timeout SEC] [-x VAR[=VALUE]]... [--tf-config | --ps K]
//             [-H h1:2,h2:2 | --hostfile FILE] [--map-by slot|node]
//             [--launch-agent 'ssh -o BatchMode=yes -o ConnectTimeout=10 {host}'] [--store-addr
//             ADDR] program [args...]
//
// Hosts the job's TCP store on 127.0.0.1 (kernel-chosen port, random job
// token), forks N ranks with CHORUS_RANK, CHORUS_WORLD_SIZE, CHORUS_LOCAL_RANK,
// CHORUS_LOCAL_SIZE, CHORUS_STORE_ADDR and CHORUS_JOB_TOKEN (and TF_CONFIG
// with --tf-config), and stops the whole job when a rank fails, on SIGINT or
// SIGTERM, or at --timeout. See tools/launcher/job.hpp for the exit status.
// Across hosts, each other host's ranks are started by `chorusrun
// --host-agent` run there through the launch agent (tools/launcher/remote.hpp).
#include <CLI/CLI.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "base/bootstrap/tf_cluster.hpp"
#include "base/core/config.hpp"
#include "base/core/error.hpp"
#include "tools/launcher/hosts.hpp"
#include "tools/launcher/job.hpp"
#include "tools/launcher/remote.hpp"

namespace {

// Open MPI spells the rank count "-np", which CLI11 would read as "-n p".
// Rewrite it, but only among chorusrun's own options, never in the program's
// arguments.
std::vector<std::string> normalise_args(int argc, char** argv) {
  static const std::set<std::string> takes_value = {
      "-n",          "-np", "--np",   "--timeout",  "-x",       "--bind-to",
      "--ps",        "-H",  "--host", "--hostfile", "--map-by", "--launch-agent",
      "--store-addr"};
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--" || a.empty() || a[0] != '-') break;  // the program starts here
    if (a == "-np") args[i] = "--np";
    if (takes_value.count(a)) ++i;
  }
  return args;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw chorus::UsageError(fmt::format("--hostfile {}: cannot read it", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// -H / --hostfile: which ranks run here and which on each other host.
void place_ranks(chorus::launcher::JobOptions& options, const std::string& host_list,
                 const std::string& hostfile, const std::string& map_by) {
  using namespace chorus::launcher;
  if (!host_list.empty() && !hostfile.empty())
    throw chorus::UsageError("give -H or --hostfile, not both");
  const std::vector<HostSlots> hosts = host_list.empty()
                                           ? parse_hostfile(read_text_file(hostfile), hostfile)
                                           : parse_host_list(host_list);
  const std::vector<RankPlacement> placement = map_ranks(hosts, options.np, parse_map_by(map_by));
  options.np = static_cast<int>(placement.size());
  std::vector<bool> local(hosts.size());
  for (size_t h = 0; h < hosts.size(); ++h) local[h] = is_local_host(hosts[h].name);
  options.ranks.emplace();
  std::vector<std::vector<int>> ranks_of(hosts.size());
  for (int r = 0; r < options.np; ++r) {
    const auto h = static_cast<size_t>(placement[static_cast<size_t>(r)].host);
    if (local[h]) {
      options.ranks->push_back(r);
      if (options.host_name.empty()) options.host_name = hosts[h].name;
    }
    ranks_of[h].push_back(r);
  }
  for (size_t h = 0; h < hosts.size(); ++h)
    if (!local[h] && !ranks_of[h].empty())
      options.remote_hosts.push_back({hosts[h].name, ranks_of[h]});
  if (options.remote_hosts.empty()) {  // every rank here: as without -H
    options.ranks.reset();
    options.host_name.clear();
  } else if (options.tf_config || options.ps > 0) {
    throw chorus::UsageError("--tf-config and --ps run on one host only");
  }
}

}  // namespace

int main(int argc, char** argv) {
  chorus::launcher::JobOptions options;
  std::string timeout_text, host_list, hostfile, map_by = "slot";
  bool host_agent = false;
  CLI::App app{"Start the ranks of a Chorus job on this machine or across hosts."};
  app.add_option("-n,--np", options.np,
                 "Number of ranks (also -np); with -H or --hostfile, default: one per slot")
      ->check(CLI::Range(1, 4096));
  app.add_flag("--tag-output", options.tag_output,
               "Prefix every output line with [1,<rank>]<stdout>: or <stderr>: (as Open MPI)");
  app.add_option("--timeout", timeout_text,
                 "Stop the job after this long (seconds, or 500ms, 2m) and exit with 124");
  app.add_option("-x", options.exports,
                 "Export VAR (its value here) or set VAR=VALUE in every rank; repeatable")
      ->allow_extra_args(false);
  app.add_option("--bind-to", options.bind_to,
                 "core: pin rank r to the r-th usable CPU; auto (default): core when the job "
                 "has 2 ranks or more and at least as many CPUs as ranks; none: no binding")
      ->check(CLI::IsMember({"auto", "core", "none"}));
  app.add_flag("--tf-config", options.tf_config,
               "Also set TF_CONFIG: one worker task per rank (task.index = rank), each with its "
               "own free 127.0.0.1 port for TensorFlow's servers");
  app.add_option("--ps", options.ps,
                 "Parameter-server job: the last K ranks are TF_CONFIG ps tasks, rank 0 the "
                 "chief, the others workers (implies --tf-config); a worker that fails does not "
                 "stop the job")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-H,--host", host_list,
                 "Hosts and their slots, as mpirun: h1:2,h2:2 (a host without :N has 1 slot)");
  app.add_option("--hostfile", hostfile,
                 "Open MPI hostfile: one 'host slots=N' per line, # comments");
  app.add_option("--map-by", map_by,
                 "slot (default): fill each host's slots in turn; node: one rank per host in turn")
      ->check(CLI::IsMember({"slot", "node"}));
  app.add_option(
      "--launch-agent", options.launch_agent,
      "Command that runs a program on another host, {host} replaced by its name "
      "(default: ssh -o BatchMode=yes -o ConnectTimeout=10 {host}; e.g. ip netns exec {host})");
  app.add_option("--store-addr", options.store_addr,
                 "Address of this machine that every host reaches, for the job's store "
                 "(default: this machine's end of the route to the first other host)");
  app.add_flag("--host-agent", host_agent,
               "Internal: run one host's ranks for a chorusrun elsewhere (job on stdin)")
      ->group("");
  app.prefix_command();  // everything from the program on belongs to the program
  app.footer(
      "Exit status: 0 when every rank exits 0 (with --ps: every rank but failed workers); else "
      "that of the first rank to fail (128+S for signal S), 124 on --timeout, 127 when the "
      "program is not found.");

  std::vector<std::string> args = normalise_args(argc, argv);
  std::vector<const char*> cargs;
  for (auto& a : args) cargs.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is fine; a usage error is 2
  }
  if (host_agent) {
    try {
      return chorus::launcher::run_job(
          chorus::launcher::decode_agent_job(chorus::launcher::read_first_line(0)));
    } catch (const std::exception& e) {
      fmt::print(stderr, "chorusrun --host-agent: {}\n", e.what());
      return 1;
    }
  }
  options.command = app.remaining();
  if (!options.command.empty() && options.command.front() == "--")
    options.command.erase(options.command.begin());
  if (options.command.empty()) {
    fmt::print(stderr, "chorusrun: no program given\n{}", app.help());
    return 2;
  }
  try {
    if (!host_list.empty() || !hostfile.empty())
      place_ranks(options, host_list, hostfile, map_by);
    else if (options.np == 0)
      throw chorus::UsageError("give the number of ranks (-np N), or hosts (-H, --hostfile)");
    chorus::bootstrap::tf_launch_shape(options.np, options.ps);
  } catch (const chorus::Error& e) {
    fmt::print(stderr, "chorusrun: {}\n", e.what());
    return 2;
  }
  try {
    if (!timeout_text.empty()) {
      options.timeout_s = chorus::parse_seconds(timeout_text);
      if (options.timeout_s <= 0) throw chorus::UsageError("must be positive");
    }
  } catch (const chorus::Error& e) {
    fmt::print(stderr, "chorusrun: --timeout {}: {}\n", timeout_text, e.what());
    return 2;
  }
  try {
    return chorus::launcher::run_job(options);
  } catch (const std::exception& e) {
    fmt::print(stderr, "chorusrun: {}\n", e.what());
    return 1;
  }
}
