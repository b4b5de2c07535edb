#include "collectives/common/side_stages.hpp"

#include <fmt/format.h>
#include <pthread.h>

#include <utility>

#include "base/core/error.hpp"

namespace chorus {

SideStages::SideStages(std::function<void(int)> work, bool threaded) : work_(std::move(work)) {
  if (threaded) thread_ = std::thread([this] { main(); });
}

SideStages::~SideStages() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void SideStages::release(int segment) {
  if (!thread_.joinable()) {
    // Unthreaded: in order, at once; a failure propagates from here.
    work_(segment);
    done_ = released_ = segment + 1;
    return;
  }
  {
    std::lock_guard lock(mu_);
    released_ = segment + 1;
  }
  changed_.notify_all();
}

void SideStages::wait(int segment, const Deadline& deadline) {
  if (!thread_.joinable()) return;
  std::unique_lock lock(mu_);
  const bool ended = changed_.wait_until(lock, deadline.time_point() + kGrace,
                                         [&] { return done_ > segment || error_; });
  if (error_) std::rethrow_exception(error_);
  if (!ended)
    throw IoError(CHORUS_ERR_TIMEOUT,
                  fmt::format("timed out waiting for segment {} of the stage across hosts "
                              "(its thread is still inside it)",
                              segment));
}

void SideStages::main() {
  pthread_setname_np(pthread_self(), "chorus-stages");
  for (int segment = 0;; ++segment) {
    {
      std::unique_lock lock(mu_);
      changed_.wait(lock, [&] { return stop_ || released_ > segment; });
      if (stop_) return;  // the caller left (it threw): run no more
    }
    try {
      work_(segment);
    } catch (...) {
      std::lock_guard lock(mu_);
      error_ = std::current_exception();
      changed_.notify_all();
      return;
    }
    {
      std::lock_guard lock(mu_);
      done_ = segment + 1;
    }
    changed_.notify_all();
  }
}

}  // namespace chorus
