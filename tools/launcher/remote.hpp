// The other hosts of a multi-host job, as Open MPI's orted does it: for each
// remote host chorusrun runs `<launch agent> <chorusrun> --host-agent` (the
// agent template with {host} replaced, through /bin/sh), writes that host's
// part of the job as one JSON line on the agent's stdin and keeps the pipe
// open. The agent starts the host's ranks (job.cpp, host_agent mode), writes
// their output lines on its stdout (tagged if asked) and its control lines:
//   <kControlPrefix>started
//   <kControlPrefix>exit <rank> <status> <what happened, for messages>
// Closing the agent's stdin stops its ranks (SIGTERM, then SIGKILL after the
// grace period) and the agent exits: chorusrun closes it to stop the job, and
// the pipe closes by itself when chorusrun dies (no orphans). Over ssh the
// remote end sees the same EOF when the connection goes.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/bootstrap/net.hpp"
#include "base/core/deadline.hpp"
#include "tools/launcher/job.hpp"
#include "tools/launcher/output.hpp"

namespace chorus::launcher {

// Starts control lines on an agent's stdout: a rank's line never begins so.
inline constexpr std::string_view kControlPrefix =
    "\x1f"
    "chorus-agent:";

// The job description an agent gets: JSON text, one line.
std::string encode_agent_job(const JobOptions& options);
JobOptions decode_agent_job(const std::string& line);
// Reads the first line of fd (the description) without reading past it.
std::string read_first_line(int fd);

// Whether `name` is this machine: "localhost", the host name, or a name that
// resolves to an address of this network namespace.
bool is_local_host(const std::string& name);
// The local address of the route to `host` (what it would see us as), for the
// store; throws UsageError naming the host when it does not resolve.
std::string local_address_towards(const std::string& host);

// Where the job's store listens: 127.0.0.1 on one host; across hosts
// --store-addr, else local_address_towards(the first remote host). Throws
// UsageError, suggesting --store-addr, when this machine cannot listen there.
std::string store_listen_host(const JobOptions& options);

class RemoteHosts {
 public:
  // A remote rank's end or a host's failure: status 0 is a clean exit.
  using ExitHandler = std::function<void(int status, const std::string& what)>;
  RemoteHosts(const JobOptions& options, ExitHandler on_exit);
  ~RemoteHosts();

  // Starts every agent with the job's shared part (store, token, exports).
  // Returns the agents' pids, for the job's guard.
  std::vector<pid_t> start(const JobOptions& shared);
  void add_fds(std::vector<pollfd>& fds) const;  // the agents' stdout
  void handle(const pollfd* fds, size_t count);  // those of add_fds that poll answered
  bool reaped(pid_t pid, int status);            // false: not an agent
  bool is_agent(pid_t pid) const;
  void stop();             // closes every agent's stdin: they stop their ranks and exit
  void check_deadlines();  // agents that do not answer or stop in time
  std::optional<Deadline> next_deadline() const;
  int running() const;  // remote ranks not known to have ended

 private:
  struct Agent {
    JobOptions::RemoteHost host;
    pid_t pid = -1;
    bool alive = false;
    bool started = false;
    std::vector<bool> ended;  // per rank of host.ranks
    bootstrap::UniqueFd to_agent, from_agent;
  };
  void drain(size_t agent);
  void control(Agent& agent, std::string_view line);
  void lost(Agent& agent, int status, const std::string& why);
  void kill_agent(Agent& agent);

  const JobOptions& o_;
  ExitHandler on_exit_;
  std::vector<Agent> agents_;
  OutputForwarder lines_;  // splits each agent's stdout into lines
  Deadline start_deadline_ = Deadline::after_ms(0);
  std::optional<Deadline> stop_deadline_;
};

}  // namespace chorus::launcher
