// The stage across hosts of a pipelined hierarchical algorithm, run segment
// after segment on a thread beside the caller's, so that the caller's stages
// within the host (shared memory, CPU-bound) overlap it (network-bound).
//
// The caller releases segment s once its input is ready and waits for it
// before using its output; work(s) runs for s = 0, 1, ... in that order, so
// the sub-calls on the team across hosts keep one order on every rank. Not
// threaded (the transport refuses concurrent waits, or there is no work),
// release(s) runs work(s) at once on the caller's thread: the same sub-calls
// in the same order per team, without the overlap.
//
// Failure: an exception of work(s) is kept, later segments do not run, and
// the next wait() rethrows it. The destructor (also when the caller throws)
// lets the segment under way finish (its peers across hosts do not depend
// on this host's other stages) and joins.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "base/core/deadline.hpp"

namespace chorus {

class SideStages {
 public:
  SideStages(std::function<void(int segment)> work, bool threaded);
  ~SideStages();
  SideStages(const SideStages&) = delete;
  SideStages& operator=(const SideStages&) = delete;

  // Segments up to `segment` may run (release them in order).
  void release(int segment);
  // Returns once work(segment) has finished; rethrows a failure of it or of
  // an earlier segment. work's own waits end at the call's `deadline` with
  // an error that names the peers; this one gives up kGrace after it (then
  // with IoError(CHORUS_ERR_TIMEOUT)) in case work is stuck past it.
  static constexpr std::chrono::seconds kGrace{2};
  void wait(int segment, const Deadline& deadline);

 private:
  void main();

  std::function<void(int)> work_;
  std::mutex mu_;  // guards the four below
  std::condition_variable changed_;
  int released_ = 0;  // segments [0, released_) may run
  int done_ = 0;      // segments [0, done_) have finished
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // not started when not threaded
};

}  // namespace chorus
