#include "tools/launcher/job.hpp"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/bootstrap/net.hpp"
#include "base/bootstrap/tcp_store.hpp"
#include "base/bootstrap/tf_cluster.hpp"
#include "base/core/config.hpp"
#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "collectives/shm/segment.hpp"
#include "tools/launcher/environment.hpp"
#include "tools/launcher/guard.hpp"
#include "tools/launcher/output.hpp"
#include "tools/launcher/remote.hpp"
#include "tools/launcher/tf_config.hpp"

extern char** environ;

namespace chorus::launcher {
namespace {

using bootstrap::UniqueFd;

// Variables chorusrun sets itself; inherited values (a chorusrun inside a
// chorusrun job) are replaced.
const char* const kManaged[] = {"CHORUS_RANK",       "CHORUS_WORLD_SIZE", "CHORUS_LOCAL_RANK",
                                "CHORUS_LOCAL_SIZE", "CHORUS_STORE_ADDR", "CHORUS_JOB_TOKEN"};

// "chorusrun", or "chorusrun@<host>" in a host agent.
std::string say_prefix = "chorusrun";

void say(const std::string& message) {
  write_fully(2, say_prefix + ": " + message + "\n");
}

Deadline after_seconds(double s) {
  return Deadline::after(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s)));
}

struct RankProc {
  pid_t pid = -1;
  bool running = false;
  UniqueFd out, err;  // read ends of the rank's stdout/stderr with --tag-output
};

// -x with the values resolved here; warns about variables that are not set.
std::vector<std::string> exports_to_send(const std::vector<std::string>& exports) {
  std::vector<std::string> unset;
  std::vector<std::string> resolved = resolved_exports(exports, unset);
  for (const auto& name : unset)
    say(fmt::format("warning: -x {}: the variable is not set here; not exported", name));
  return resolved;
}

std::vector<int> ranks_started_here(const JobOptions& o) {
  if (o.ranks) return *o.ranks;
  std::vector<int> all(static_cast<size_t>(o.np));
  for (int r = 0; r < o.np; ++r) all[static_cast<size_t>(r)] = r;
  return all;
}

class Job {
 public:
  explicit Job(const JobOptions& o)
      : o_(o),
        shape_(bootstrap::tf_launch_shape(o.np, o.ps)),
        global_rank_(ranks_started_here(o)),
        ranks_(global_rank_.size()),
        output_(o.np, o.tag_output || !o.host_agent) {}
  int run();

 private:
  void spawn_all(const std::string& store_addr, const std::string& token);
  void start_remote(const std::string& store_addr, const std::string& token);
  void remote_exit(int status, const std::string& what);
  void report(int rank, int status, const std::string& what);  // host agent: to chorusrun
  int local_size() const { return static_cast<int>(global_rank_.size()); }
  void reap();
  void begin_stop();
  void kill_now();
  void signal_all(int sig);
  void kill_adopted();
  void read_output(int index, int stream);
  bool binding_for(int rank, cpu_set_t* set) const;
  // With --ps the workers other than the chief may fail: parameter-server
  // training goes on without them, as TensorFlow's does.
  // "rank 3 (pid 42)"; with --ps also its task: "rank 3 (ps 1, pid 42)";
  // across hosts its host: "rank 3 (pid 42 on h1)".
  std::string describe(int rank, pid_t pid) const {
    if (!o_.host_name.empty())
      return fmt::format("rank {} (pid {} on {})", rank, pid, o_.host_name);
    if (o_.ps == 0) return fmt::format("rank {} (pid {})", rank, pid);
    const bootstrap::TfTask task = bootstrap::tf_task_of(shape_, rank);
    return fmt::format("rank {} ({} {}, pid {})", rank, task.type, task.index, pid);
  }
  bool may_fail(int rank) const {
    return o_.ps > 0 && bootstrap::tf_task_of(shape_, rank).type == "worker";
  }

  const JobOptions& o_;
  const bootstrap::TfClusterShape shape_;
  std::vector<int> failed_workers_;     // with --ps: ranks that failed while the job went on
  const std::vector<int> global_rank_;  // of each rank started here
  std::vector<RankProc> ranks_;         // by index on this host (the local rank)
  OutputForwarder output_;
  std::optional<RemoteHosts> remote_;  // the other hosts' agents
  bool launcher_gone_ = false;         // host agent: stdin reached its end
  std::vector<std::string> exports_;   // -x as VAR=VALUE, for every host
  UniqueFd sigfd_;
  std::optional<JobGuard> guard_;  // kills the ranks' groups if chorusrun is killed
  sigset_t old_mask_{};
  int running_ = 0;
  enum class State { kRunning, kStopping, kKilling } state_ = State::kRunning;
  std::optional<int> first_failure_code_;
  bool timed_out_ = false;
  int stop_signal_ = 0;
  Deadline stage_deadline_ = Deadline::after_ms(0);  // end of the SIGTERM or SIGKILL stage
};

void Job::spawn_all(const std::string& store_addr, const std::string& token) {
  Env base;
  for (char** e = environ; *e != nullptr; ++e) base.vars_.emplace_back(*e);
  for (const char* name : kManaged) base.unset(name);
  if (o_.tf_config || o_.ps > 0) base.unset("TF_CONFIG");
  for (const auto& x : exports_) {
    auto eq = x.find('=');
    base.set(x.substr(0, eq), x.substr(eq + 1));
  }
  auto program = resolve_program(o_.command[0], base);
  if (!program) throw UsageError(fmt::format("'{}' not found in PATH", o_.command[0]));

  std::vector<char*> argv;
  for (const auto& a : o_.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  UniqueFd devnull(open("/dev/null", O_RDONLY | O_CLOEXEC));
  // Rank 0 may read a piped stdin; a terminal stays with chorusrun (the ranks
  // run in their own process groups and would be stopped by SIGTTIN).
  // A host agent's stdin is its launcher's pipe.
  bool share_stdin = !isatty(0) && !o_.host_agent;
  // A host agent forwards whole lines, so that its control lines stay whole.
  const bool capture = o_.tag_output || o_.host_agent;
  std::string exec_error = fmt::format("chorusrun: cannot execute '{}': ", *program);
  pid_t parent = getpid();
  const std::vector<std::string> tf_configs =
      o_.tf_config || o_.ps > 0 ? launcher::tf_configs(o_.np, o_.ps) : std::vector<std::string>{};

  for (int i = 0; i < local_size(); ++i) {
    const int r = global_rank_[static_cast<size_t>(i)];
    Env env = base;
    env.set("CHORUS_RANK", std::to_string(r));
    env.set("CHORUS_WORLD_SIZE", std::to_string(o_.np));
    env.set("CHORUS_LOCAL_RANK", std::to_string(i));
    env.set("CHORUS_LOCAL_SIZE", std::to_string(local_size()));
    env.set("CHORUS_STORE_ADDR", store_addr);
    env.set("CHORUS_JOB_TOKEN", token);
    if (!tf_configs.empty()) env.set("TF_CONFIG", tf_configs[static_cast<std::size_t>(r)]);
    std::vector<char*> envp;
    for (auto& v : env.vars_) envp.push_back(v.data());
    envp.push_back(nullptr);

    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    if (capture && (pipe2(out_pipe, O_CLOEXEC) < 0 || pipe2(err_pipe, O_CLOEXEC) < 0))
      throw IoError(CHORUS_ERR_IO, errno_message("pipe", errno));
    UniqueFd out_w(out_pipe[1]), err_w(err_pipe[1]);
    ranks_[i].out = UniqueFd(out_pipe[0]);
    ranks_[i].err = UniqueFd(err_pipe[0]);
    int stdin_fd = (r == 0 && share_stdin) ? -1 : devnull.get();

    cpu_set_t binding;
    const bool bind = binding_for(i, &binding);
    pid_t pid = fork();
    if (pid < 0) throw IoError(CHORUS_ERR_IO, errno_message("fork", errno));
    if (pid == 0) {
      // Child: async-signal-safe calls only, then exec.
      setpgid(0, 0);                     // killpg reaches whatever the rank starts
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // nothing outlives a killed chorusrun
      if (getppid() != parent) _exit(127);
      if (bind) sched_setaffinity(0, sizeof binding, &binding);
      signal(SIGPIPE, SIG_DFL);
      sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
      if (stdin_fd >= 0) dup2(stdin_fd, 0);
      if (out_w.valid()) dup2(out_w.get(), 1);
      if (err_w.valid()) dup2(err_w.get(), 2);
      execve(program->c_str(), argv.data(), envp.data());
      int err = errno;
      (void)!write(2, exec_error.data(), exec_error.size());
      const char* text = strerrordesc_np(err);
      (void)!write(2, text, strlen(text));
      (void)!write(2, "\n", 1);
      _exit(127);
    }
    setpgid(pid, pid);  // also here, so killpg works before the child ran
    guard_->watch(pid);
    ranks_[i].pid = pid;
    ranks_[i].running = true;
    if (ranks_[i].out.valid()) {
      bootstrap::set_nonblocking(ranks_[i].out.get());
      bootstrap::set_nonblocking(ranks_[i].err.get());
    }
    ++running_;
    logger("launcher").debug("rank {} started as pid {}", r, pid);
  }
}

// Like Open MPI's default for small jobs: when every rank can have a CPU of
// its own, pin local rank r to the r-th allowed CPU, so that two ranks never share a
// core while another idles (their spinning waiters would then take turns).
bool Job::binding_for(int rank, cpu_set_t* set) const {
  if (o_.bind_to == "none") return false;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return false;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.empty()) return false;
  if (o_.bind_to == "auto" && (local_size() < 2 || local_size() > static_cast<int>(cpus.size())))
    return false;
  CPU_ZERO(set);
  CPU_SET(cpus[static_cast<std::size_t>(rank) % cpus.size()], set);
  return true;
}

void Job::reap() {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;  // 0: none ready; -1/ECHILD: nothing left
    if (remote_ && remote_->reaped(pid, status)) continue;
    int i = 0;
    while (i < local_size() && ranks_[i].pid != pid) ++i;
    if (i == local_size()) continue;  // an orphaned grandchild we adopted as subreaper
    const int r = global_rank_[static_cast<size_t>(i)];
    ranks_[i].running = false;
    --running_;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::string how = WIFEXITED(status) ? fmt::format("exited with status {}", code)
                                        : fmt::format("killed by signal {} ({})", WTERMSIG(status),
                                                      sigdescr_np(WTERMSIG(status)));
    if (o_.host_agent) {
      // chorusrun decides and says what happens; this host stops its ranks
      // at once rather than wait for chorusrun to tell it.
      report(r, code, describe(r, pid).substr(fmt::format("rank {} ", r).size()) + " " + how);
      if (code != 0 && state_ == State::kRunning) {
        first_failure_code_ = code;
        begin_stop();
      }
      continue;
    }
    if (code == 0 || state_ != State::kRunning) {
      logger("launcher").debug("rank {} (pid {}) {}", r, pid, how);
      continue;
    }
    if (may_fail(r)) {
      failed_workers_.push_back(r);
      say(fmt::format("{} {}; the job goes on without it (--ps)", describe(r, pid), how));
      continue;
    }
    first_failure_code_ = code;
    say(fmt::format("{} {}; stopping the job", describe(r, pid), how));
    begin_stop();
  }
}

void Job::signal_all(int sig) {
  // The whole process group of each rank: what a rank started goes too.
  // Once a rank's leader is reaped its number may be reused, but not while
  // a member of its group lives; as subreaper we adopt those members, so a
  // group with a child of ours in it is still the rank's group.
  for (auto& rank : ranks_) {
    if (rank.pid <= 0) continue;
    siginfo_t si{};
    if (rank.running ||
        waitid(P_PGID, static_cast<id_t>(rank.pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0)
      killpg(rank.pid, sig);
  }
}

void Job::kill_adopted() {
  // Descendants that left their rank's process group (setsid, daemons) were
  // reparented to us when their parents died; they are our children, so
  // their pids are safe to signal. Any thread of ours may be their parent.
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream children(task.path() / "children");
    pid_t pid;
    while (children >> pid) {
      // The guard is dismissed, not killed; agents stop by themselves.
      bool spare = pid == guard_->pid() || (remote_ && remote_->is_agent(pid));
      for (auto& rank : ranks_) spare |= rank.pid == pid && rank.running;
      if (!spare) kill(pid, SIGKILL);
    }
  }
}

void Job::begin_stop() {
  if (state_ != State::kRunning) return;
  state_ = State::kStopping;
  signal_all(SIGTERM);
  if (remote_) remote_->stop();
  stage_deadline_ = after_seconds(o_.grace_s);
}

void Job::kill_now() {
  signal_all(SIGKILL);
  state_ = State::kKilling;
  // SIGKILL cannot be caught; only a process stuck in the kernel outlives this.
  stage_deadline_ = Deadline::after_ms(5000);
}

void Job::read_output(int index, int stream) {
  UniqueFd& fd = stream == 1 ? ranks_[index].out : ranks_[index].err;
  const int rank = global_rank_[static_cast<size_t>(index)];
  char buf[65536];
  ssize_t n = read(fd.get(), buf, sizeof buf);
  if (n > 0) return output_.feed(rank, stream, {buf, static_cast<size_t>(n)});
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  output_.finish(rank, stream);
  fd.reset();
}

void Job::start_remote(const std::string& store_addr, const std::string& token) {
  JobOptions shared = o_;
  shared.store_addr = store_addr;
  shared.token = token;
  shared.exports = exports_;
  for (pid_t pid : remote_->start(shared)) guard_->watch(pid);
}

void Job::remote_exit(int status, const std::string& what) {
  if (status == 0 || state_ != State::kRunning) {
    logger("launcher").debug("{}", what);
    return;
  }
  first_failure_code_ = status;
  say(what + "; stopping the job");
  begin_stop();
}

void Job::report(int rank, int status, const std::string& what) {
  write_fully(1, fmt::format("{}exit {} {} {}\n", kControlPrefix, rank, status, what));
}

int Job::run() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  // Blocked before the store thread starts so every thread inherits the mask
  // and the signals reach only the signalfd.
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
  sigfd_ = UniqueFd(signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigfd_.valid()) throw IoError(CHORUS_ERR_IO, errno_message("signalfd", errno));
  signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the supervisor
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  // Before the store's thread starts.
  guard_.emplace(static_cast<std::size_t>(local_size()) + o_.remote_hosts.size());
  if (o_.host_agent) say_prefix = "chorusrun@" + o_.host_name;

  exports_ = exports_to_send(o_.exports);
  const std::string token = o_.host_agent ? o_.token : random_token();
  std::optional<TcpStoreServer> server;
  if (!o_.host_agent) server.emplace(token, store_listen_host(o_), 0);
  const std::string store_addr = server ? server->address() : o_.store_addr;
  if (!o_.remote_hosts.empty())
    remote_.emplace(o_, [this](int status, const std::string& what) { remote_exit(status, what); });
  try {
    if (remote_) start_remote(store_addr, token);
    spawn_all(store_addr, token);
    if (o_.host_agent) write_fully(1, fmt::format("{}started\n", kControlPrefix));
  } catch (const Error& e) {
    say(e.what());
    first_failure_code_ = dynamic_cast<const UsageError*>(&e) ? 127 : 1;
    begin_stop();
  }
  auto job_deadline = o_.timeout_s > 0 ? after_seconds(o_.timeout_s) : Deadline::after_ms(0);
  std::optional<Deadline> drain_deadline;
  std::vector<pollfd> fds;
  std::vector<std::pair<int, int>> who;  // rank and stream of fds[i + 1]

  for (;;) {
    reap();
    if (running_ == 0 && (!remote_ || remote_->running() == 0) && !drain_deadline) {
      signal_all(SIGKILL);  // the job is over: stray descendants go too
      kill_adopted();
      drain_deadline = Deadline::after_ms(2000);
    }
    fds.assign(1, {sigfd_.get(), POLLIN, 0});
    who.clear();
    for (int i = 0; i < local_size(); ++i)
      for (int s : {1, 2}) {
        const UniqueFd& fd = s == 1 ? ranks_[i].out : ranks_[i].err;
        if (!fd.valid()) continue;
        fds.push_back({fd.get(), POLLIN, 0});
        who.push_back({i, s});
      }
    const size_t remote_fds = fds.size();
    if (remote_) remote_->add_fds(fds);
    const size_t agent_fds = fds.size() - remote_fds;
    if (drain_deadline && (fds.size() == 1 || drain_deadline->expired())) break;
    // A host agent watches its stdin: its end means chorusrun is gone or
    // stops the job. Not while draining: it may close first.
    const bool watch_launcher = o_.host_agent && !launcher_gone_ && !drain_deadline;
    if (watch_launcher) fds.push_back({0, POLLIN, 0});

    int timeout = -1;
    if (drain_deadline)
      timeout = drain_deadline->poll_timeout_ms(60000);
    else if (state_ != State::kRunning && running_ > 0)
      timeout = stage_deadline_.poll_timeout_ms(60000);
    else if (state_ == State::kRunning && o_.timeout_s > 0)
      timeout = job_deadline.poll_timeout_ms(60000);
    if (auto remote_deadline = remote_ ? remote_->next_deadline() : std::nullopt) {
      const int remote_timeout = remote_deadline->poll_timeout_ms(60000);
      timeout = timeout < 0 ? remote_timeout : std::min(timeout, remote_timeout);
    }
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR)
      throw IoError(CHORUS_ERR_IO, errno_message("poll", errno));
    if (watch_launcher && fds.back().revents != 0) {
      char byte;
      const ssize_t n = read(0, &byte, 1);  // anything but the end is ignored
      if (n == 0 || (n < 0 && errno != EINTR)) {
        launcher_gone_ = true;
        logger("launcher").debug("stdin closed: stopping this host's ranks");
        begin_stop();
      }
    }

    signalfd_siginfo si;
    while (read(sigfd_.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      int sig = static_cast<int>(si.ssi_signo);
      if (sig == SIGCHLD) continue;  // reaped at the top of the loop
      if (state_ == State::kRunning) {
        say(fmt::format("received SIG{}; stopping the job", sigabbrev_np(sig)));
        stop_signal_ = sig;
        begin_stop();
      } else if (state_ == State::kStopping) {
        say(fmt::format("received SIG{} again; killing the job", sigabbrev_np(sig)));
        kill_now();
      }
    }
    for (size_t i = 0; i < who.size(); ++i)
      if (fds[i + 1].revents) read_output(who[i].first, who[i].second);
    if (remote_) {
      remote_->handle(fds.data() + remote_fds, agent_fds);
      remote_->check_deadlines();
    }

    if (state_ == State::kRunning && o_.timeout_s > 0 && job_deadline.expired()) {
      say(fmt::format("the job did not finish within --timeout {} s; stopping it", o_.timeout_s));
      timed_out_ = true;
      begin_stop();
    }
    reap();
    if (running_ > 0 && state_ == State::kStopping && stage_deadline_.expired()) {
      say(fmt::format("{} rank(s) still running {} s after SIGTERM; sending SIGKILL", running_,
                      o_.grace_s));
      kill_now();
    } else if (running_ > 0 && state_ == State::kKilling && stage_deadline_.expired()) {
      say(fmt::format("{} rank(s) survive SIGKILL (stuck in the kernel?); giving up", running_));
      break;
    }
  }
  guard_->dismiss();  // every rank's group was signalled above
  // Ranks unlink their shared-memory segments once all have mapped them; one
  // killed inside that window would leave its segment behind.
  for (const std::string& name : shm::remove_segments(shm::segment_name_prefix(token)))
    say(fmt::format("removed shared-memory segment /dev/shm/{} left by the job", name));
  if (!failed_workers_.empty())
    say(
        fmt::format("{} worker(s) failed during the job (rank {}); the chief and the parameter "
                    "servers decide its outcome",
                    failed_workers_.size(), fmt::join(failed_workers_, ", ")));
  if (first_failure_code_) return *first_failure_code_;
  if (timed_out_) return 124;
  if (stop_signal_ != 0) return 128 + stop_signal_;
  return 0;
}

}  // namespace

int run_job(const JobOptions& options) {
  return Job(options).run();
}

}  // namespace chorus::launcher
