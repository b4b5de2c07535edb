// chorusrun: starts the ranks of a Chorus job on this machine.
//
//   chorusrun -np N [--tag-output] [--timeout SEC] [-x VAR[=VALUE]]... [--tf-config | --ps K]
//             program [args...]
//
// Hosts the job's TCP store on 127.0.0.1 (kernel-chosen port, random job
// token), forks N ranks with CHORUS_RANK, CHORUS_WORLD_SIZE, CHORUS_LOCAL_RANK,
// CHORUS_LOCAL_SIZE, CHORUS_STORE_ADDR and CHORUS_JOB_TOKEN (and TF_CONFIG
// with --tf-config), and stops the whole job when a rank fails, on SIGINT or
// SIGTERM, or at --timeout. See tools/launcher/job.hpp for the exit status.
#include <CLI/CLI.hpp>
#include <set>

#include "base/bootstrap/tf_cluster.hpp"
#include "base/core/config.hpp"
#include "base/core/error.hpp"
#include "tools/launcher/job.hpp"

namespace {

// Open MPI spells the rank count "-np", which CLI11 would read as "-n p".
// Rewrite it, but only among chorusrun's own options, never in the program's
// arguments.
std::vector<std::string> normalise_args(int argc, char** argv) {
  static const std::set<std::string> takes_value = {"-n", "-np",       "--np", "--timeout",
                                                    "-x", "--bind-to", "--ps"};
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--" || a.empty() || a[0] != '-') break;  // the program starts here
    if (a == "-np") args[i] = "--np";
    if (takes_value.count(a)) ++i;
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  chorus::launcher::JobOptions options;
  std::string timeout_text;
  CLI::App app{"Start the ranks of a Chorus job on this machine."};
  app.add_option("-n,--np", options.np, "Number of ranks (also -np)")
      ->required()
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
  options.command = app.remaining();
  if (!options.command.empty() && options.command.front() == "--")
    options.command.erase(options.command.begin());
  if (options.command.empty()) {
    fmt::print(stderr, "chorusrun: no program given\n{}", app.help());
    return 2;
  }
  try {
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
