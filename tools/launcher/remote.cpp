#include "tools/launcher/remote.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netdb.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <nlohmann/json.hpp>

#include "base/core/config.hpp"
#include "base/core/error.hpp"
#include "base/core/log.hpp"

namespace chorus::launcher {
namespace {

using bootstrap::UniqueFd;

std::string shell_quote(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string self_path() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw IoError(CHORUS_ERR_IO, errno_message("readlink /proc/self/exe", errno));
  return std::string(buf, static_cast<size_t>(n));
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  return fmt::format("signal {} ({})", WTERMSIG(status), sigdescr_np(WTERMSIG(status)));
}

int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};

}  // namespace

std::string encode_agent_job(const JobOptions& o) {
  nlohmann::json j = {{"np", o.np},
                      {"ranks", o.ranks.value_or(std::vector<int>{})},
                      {"tag_output", o.tag_output},
                      {"grace_s", o.grace_s},
                      {"bind_to", o.bind_to},
                      {"exports", o.exports},
                      {"command", o.command},
                      {"store_addr", o.store_addr},
                      {"token", o.token},
                      {"host_name", o.host_name}};
  return j.dump() + "\n";
}

JobOptions decode_agent_job(const std::string& line) {
  JobOptions o;
  try {
    auto j = nlohmann::json::parse(line);
    j.at("np").get_to(o.np);
    o.ranks = j.at("ranks").get<std::vector<int>>();
    j.at("tag_output").get_to(o.tag_output);
    j.at("grace_s").get_to(o.grace_s);
    j.at("bind_to").get_to(o.bind_to);
    j.at("exports").get_to(o.exports);
    j.at("command").get_to(o.command);
    j.at("store_addr").get_to(o.store_addr);
    j.at("token").get_to(o.token);
    j.at("host_name").get_to(o.host_name);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(fmt::format("--host-agent: bad job description on stdin: {}", e.what()));
  }
  o.host_agent = true;
  return o;
}

std::string read_first_line(int fd) {
  std::string line;
  char c;
  for (;;) {
    ssize_t n = read(fd, &c, 1);  // byte by byte: what follows is the stop signal (EOF)
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(CHORUS_ERR_IO, errno_message("read stdin", errno));
    if (n == 0) throw UsageError("--host-agent: stdin closed before the job description");
    if (c == '\n') return line;
    line += c;
  }
}

bool is_local_host(const std::string& name) {
  if (name == "localhost") return true;
  char own[256] = {};
  if (gethostname(own, sizeof own - 1) == 0) {
    std::string_view mine(own);
    if (name == mine || name == mine.substr(0, mine.find('.'))) return true;
  }
  // A name of one of our addresses (a namespace's own name in the simulated
  // hosts): an address we can bind is ours.
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  AddrInfo found;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &found.list) != 0) return false;
  for (const addrinfo* a = found.list; a; a = a->ai_next) {
    UniqueFd probe(socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (probe.valid() && bind(probe.get(), a->ai_addr, a->ai_addrlen) == 0) return true;
  }
  return false;
}

std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  AddrInfo found;
  int rc = getaddrinfo(host.c_str(), "9", &hints, &found.list);
  if (rc != 0)
    throw UsageError(fmt::format(
        "host '{}' does not resolve here ({}), so the store's address cannot be chosen from the "
        "route to it; give --store-addr",
        host, gai_strerror(rc)));
  // Connecting a UDP socket sends nothing; it only picks the route and with
  // it our address on that route.
  UniqueFd s(socket(found.list->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_storage mine{};
  socklen_t len = sizeof mine;
  if (!s.valid() || connect(s.get(), found.list->ai_addr, found.list->ai_addrlen) != 0 ||
      getsockname(s.get(), reinterpret_cast<sockaddr*>(&mine), &len) != 0)
    throw UsageError(
        fmt::format("no route to host '{}' ({}); give --store-addr", host, strerrordesc_np(errno)));
  return bootstrap::numeric_host(reinterpret_cast<sockaddr*>(&mine), len);
}

std::string store_listen_host(const JobOptions& o) {
  if (o.remote_hosts.empty()) return "127.0.0.1";
  const std::string host =
      o.store_addr.empty() ? local_address_towards(o.remote_hosts.front().name) : o.store_addr;
  // Only an address of ours can be bound.
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  AddrInfo found;
  int rc = getaddrinfo(host.c_str(), "0", &hints, &found.list);
  UniqueFd probe(rc == 0 ? socket(found.list->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1);
  if (!probe.valid() || bind(probe.get(), found.list->ai_addr, found.list->ai_addrlen) != 0)
    throw UsageError(fmt::format(
        "the job's store cannot listen on '{}' ({}); give --store-addr with an address of this "
        "machine that the hosts reach",
        host, rc != 0 ? gai_strerror(rc) : strerrordesc_np(errno)));
  return host;
}

RemoteHosts::RemoteHosts(const JobOptions& options, ExitHandler on_exit)
    : o_(options),
      on_exit_(std::move(on_exit)),
      lines_(static_cast<int>(options.remote_hosts.size()),
             [this](int agent, int, std::string_view line) {
               if (line.starts_with(kControlPrefix))
                 control(agents_[static_cast<size_t>(agent)], line.substr(kControlPrefix.size()));
               else
                 write_fully(1, fmt::format("{}\n", line));
             }) {
  if (o_.launch_agent.find("{host}") == std::string::npos)
    throw UsageError(
        fmt::format("--launch-agent '{}' has no {{host}} to replace", o_.launch_agent));
}

RemoteHosts::~RemoteHosts() {
  for (auto& agent : agents_)
    if (agent.alive) killpg(agent.pid, SIGKILL);
}

std::vector<pid_t> RemoteHosts::start(const JobOptions& shared) {
  const std::string agent_command = shell_quote(self_path()) + " --host-agent";
  start_deadline_ = Deadline::after(std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(global_config().connect_timeout_s)));
  std::vector<pid_t> pids;
  for (const auto& host : o_.remote_hosts) {
    Agent& agent = agents_.emplace_back();
    agent.host = host;
    agent.ended.assign(host.ranks.size(), false);
    std::string command = o_.launch_agent;
    for (size_t at; (at = command.find("{host}")) != std::string::npos;)
      command.replace(at, 6, host.name);  // names are checked: no shell characters
    command += " " + agent_command;
    JobOptions part = shared;
    part.ranks = host.ranks;
    part.host_name = host.name;
    const std::string description = encode_agent_job(part);

    int in_pipe[2], out_pipe[2];
    if (pipe2(in_pipe, O_CLOEXEC) < 0 || pipe2(out_pipe, O_CLOEXEC) < 0)
      throw IoError(CHORUS_ERR_IO, errno_message("pipe", errno));
    UniqueFd in_r(in_pipe[0]), out_w(out_pipe[1]);
    agent.to_agent = UniqueFd(in_pipe[1]);
    agent.from_agent = UniqueFd(out_pipe[0]);
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    sigset_t none;
    sigemptyset(&none);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) throw IoError(CHORUS_ERR_IO, errno_message("fork", errno));
    if (pid == 0) {
      // Child: async-signal-safe calls only. Its own process group: a Ctrl-C
      // at the terminal reaches chorusrun, which stops the agents itself.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      signal(SIGPIPE, SIG_DFL);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      dup2(in_r.get(), 0);
      dup2(out_w.get(), 1);
      execv(argv[0], const_cast<char* const*>(argv));
      _exit(127);
    }
    setpgid(pid, pid);
    agent.pid = pid;
    agent.alive = true;
    bootstrap::set_nonblocking(agent.from_agent.get());
    // Fits the pipe's buffer; an agent that already died gives EPIPE, and
    // its exit is reported when it is reaped.
    write_fully(agent.to_agent.get(), description);
    logger("launcher").debug("host {}: agent pid {}: {}", host.name, pid, command);
    pids.push_back(pid);
  }
  return pids;
}

void RemoteHosts::add_fds(std::vector<pollfd>& fds) const {
  for (const auto& agent : agents_)
    if (agent.from_agent.valid()) fds.push_back({agent.from_agent.get(), POLLIN, 0});
}

void RemoteHosts::handle(const pollfd* fds, size_t count) {
  for (size_t k = 0; k < count; ++k)
    for (size_t i = 0; fds[k].revents != 0 && i < agents_.size(); ++i)
      if (agents_[i].from_agent.valid() && agents_[i].from_agent.get() == fds[k].fd) drain(i);
}

// Reads everything the agent's stdout holds now, up to its end.
void RemoteHosts::drain(size_t i) {
  Agent& agent = agents_[i];
  char buf[65536];
  while (agent.from_agent.valid()) {
    ssize_t n = read(agent.from_agent.get(), buf, sizeof buf);
    if (n > 0) {
      lines_.feed(static_cast<int>(i), 1, {buf, static_cast<size_t>(n)});
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;
    } else {
      lines_.finish(static_cast<int>(i), 1);
      agent.from_agent.reset();
    }
  }
}

void RemoteHosts::control(Agent& agent, std::string_view line) {
  if (line == "started") {
    agent.started = true;
    return;
  }
  int rank = -1, status = 0, consumed = 0;
  const std::string text(line);
  if (sscanf(text.c_str(), "exit %d %d %n", &rank, &status, &consumed) < 2) {
    logger("launcher").warn("host {}: unknown agent message '{}'", agent.host.name, text);
    return;
  }
  for (size_t k = 0; k < agent.host.ranks.size(); ++k)
    if (agent.host.ranks[k] == rank && !agent.ended[k]) {
      agent.ended[k] = true;
      on_exit_(status, fmt::format("rank {} {}", rank, text.substr(static_cast<size_t>(consumed))));
    }
}

bool RemoteHosts::is_agent(pid_t pid) const {
  for (const auto& agent : agents_)
    if (agent.pid == pid) return true;
  return false;
}

bool RemoteHosts::reaped(pid_t pid, int status) {
  for (size_t i = 0; i < agents_.size(); ++i) {
    Agent& agent = agents_[i];
    if (agent.pid != pid) continue;
    agent.alive = false;
    drain(i);  // its last reports are already in the pipe: read them before judging
    lost(agent, exit_code(status) == 0 ? 1 : exit_code(status),
         agent.started ? fmt::format("its launch agent ended ({})", describe_status(status))
                       : fmt::format("its launch agent failed ({}) before starting the ranks; "
                                     "agent: {}",
                                     describe_status(status), o_.launch_agent));
    return true;
  }
  return false;
}

void RemoteHosts::lost(Agent& agent, int status, const std::string& why) {
  std::vector<int> unended;
  for (size_t k = 0; k < agent.host.ranks.size(); ++k)
    if (!agent.ended[k]) {
      agent.ended[k] = true;
      unended.push_back(agent.host.ranks[k]);
    }
  if (!unended.empty())
    on_exit_(status,
             fmt::format("host {} (rank {}): {}", agent.host.name, fmt::join(unended, ", "), why));
}

void RemoteHosts::kill_agent(Agent& agent) {
  // Its ranks go with it: they die with their parent (PR_SET_PDEATHSIG) and
  // the agent's guard kills their process groups. Over ssh the remote agent
  // sees its stdin close when the connection goes.
  if (agent.alive) killpg(agent.pid, SIGKILL);
}

void RemoteHosts::stop() {
  if (stop_deadline_) return;
  for (auto& agent : agents_) agent.to_agent.reset();
  // The agents need the grace period themselves, then a moment to report.
  stop_deadline_ = Deadline::after_ms(static_cast<int64_t>(o_.grace_s * 1000) + 3000);
}

void RemoteHosts::check_deadlines() {
  for (auto& agent : agents_) {
    if (!agent.alive ||
        std::find(agent.ended.begin(), agent.ended.end(), false) == agent.ended.end())
      continue;
    if (!agent.started && start_deadline_.expired()) {
      lost(agent, 1,
           fmt::format("no answer from its launch agent within {} s (CHORUS_CONNECT_TIMEOUT); "
                       "agent: {}",
                       global_config().connect_timeout_s, o_.launch_agent));
      kill_agent(agent);
    } else if (stop_deadline_ && stop_deadline_->expired()) {
      lost(agent, 1, "its launch agent did not stop in time; killed");
      kill_agent(agent);
    }
  }
}

// While remote ranks run: the end of the stop's grace, or of the start.
std::optional<Deadline> RemoteHosts::next_deadline() const {
  if (running() == 0) return std::nullopt;
  if (stop_deadline_) return stop_deadline_;
  for (const auto& agent : agents_)
    if (agent.alive && !agent.started) return start_deadline_;
  return std::nullopt;
}

int RemoteHosts::running() const {
  int n = 0;
  for (const auto& agent : agents_)
    for (bool e : agent.ended) n += e ? 0 : 1;
  return n;
}

}  // namespace chorus::launcher
