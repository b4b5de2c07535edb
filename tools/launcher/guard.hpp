// The job's guard: a small process that outlives a chorusrun killed by
// SIGKILL (or crashed) just long enough to kill what the job's ranks started.
// PR_SET_PDEATHSIG takes each rank's own process with chorusrun, but not what
// the rank forked (a shell's children, a Python program's workers): those
// stay in the rank's process group, and the guard kills those groups.
//
// chorusrun tells the guard each rank's process group as it starts it, over a
// pipe. When chorusrun ends under its own control it dismisses the guard
// (the job's groups are already gone); when the pipe closes without that,
// chorusrun died, and the guard sends SIGKILL to every group it was told of.
// Descendants that left their group (setsid) are beyond its reach; chorusrun
// itself kills those as their subreaper while it lives.
#pragma once

#include <sys/types.h>

#include <cstddef>

#include "base/bootstrap/net.hpp"

namespace chorus::launcher {

class JobGuard {
 public:
  // Forks the guard; at most `max_groups` groups will be watched. Call it
  // before any rank starts (and, preferably, before other threads exist).
  explicit JobGuard(std::size_t max_groups);
  ~JobGuard();  // dismisses
  JobGuard(const JobGuard&) = delete;
  JobGuard& operator=(const JobGuard&) = delete;

  void watch(pid_t group);
  // The job ended under chorusrun's control: the guard exits without killing.
  void dismiss();
  pid_t pid() const { return pid_; }

 private:
  bootstrap::UniqueFd to_guard_;
  pid_t pid_ = -1;
};

}  // namespace chorus::launcher
