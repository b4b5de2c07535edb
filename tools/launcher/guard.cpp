#include "tools/launcher/guard.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/core/error.hpp"

namespace chorus::launcher {
namespace {

// Messages on the pipe: 'W' and a pid (a group to watch), or 'D' (dismissed).
constexpr char kWatch = 'W';
constexpr char kDismiss = 'D';

bool read_fully(int fd, void* buf, std::size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t got = read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

// The guard's whole life; only async-signal-safe calls (it was forked from a
// process that may have threads), and no allocation: `groups` was sized
// before the fork.
[[noreturn]] void guard_main(int from_chorusrun, pid_t* groups, std::size_t capacity) {
  // Whatever reaches chorusrun's terminal group is chorusrun's to handle.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) signal(sig, SIG_IGN);
  std::size_t count = 0;
  for (;;) {
    char kind = 0;
    if (!read_fully(from_chorusrun, &kind, 1)) break;  // chorusrun is gone
    if (kind == kDismiss) _exit(0);
    pid_t group = 0;
    if (kind != kWatch || !read_fully(from_chorusrun, &group, sizeof group)) break;
    if (count < capacity && group > 1) groups[count++] = group;
  }
  for (std::size_t i = 0; i < count; ++i) killpg(groups[i], SIGKILL);
  _exit(0);
}

}  // namespace

JobGuard::JobGuard(std::size_t max_groups) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) < 0) throw IoError(CHORUS_ERR_IO, errno_message("pipe", errno));
  bootstrap::UniqueFd read_end(fds[0]);
  to_guard_ = bootstrap::UniqueFd(fds[1]);
  std::vector<pid_t> groups(max_groups);
  pid_ = fork();
  if (pid_ < 0) throw IoError(CHORUS_ERR_IO, errno_message("fork", errno));
  if (pid_ == 0) {
    // Only the read end stays open: the guard must see EOF when chorusrun
    // (the last holder of the write end) dies, and hold nothing else.
    int keep = read_end.get();
    if (keep != 3) {
      dup2(keep, 3);
      keep = 3;
    }
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, 0);
      dup2(devnull, 1);
      dup2(devnull, 2);
    }
    close_range(4, ~0U, 0);
    setpgid(0, 0);  // out of chorusrun's group: a Ctrl-C is for chorusrun
    prctl(PR_SET_NAME, "chorusrun-guard");
    guard_main(keep, groups.data(), groups.size());
  }
}

JobGuard::~JobGuard() {
  dismiss();
}

void JobGuard::watch(pid_t group) {
  if (!to_guard_.valid()) return;
  char message[1 + sizeof(pid_t)];
  message[0] = kWatch;
  std::memcpy(message + 1, &group, sizeof group);
  (void)!write(to_guard_.get(), message, sizeof message);  // atomic: below PIPE_BUF
}

void JobGuard::dismiss() {
  if (!to_guard_.valid()) return;
  (void)!write(to_guard_.get(), &kDismiss, 1);
  to_guard_.reset();
}

}  // namespace chorus::launcher
