// Deadlines: every blocking wait in Chorus takes one. A deadline is a point on
// the steady clock; "never" exists only for internal use where an outer
// deadline bounds the wait.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace chorus {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline after(std::chrono::nanoseconds d) { return Deadline(Clock::now() + d); }
  static Deadline after_ms(int64_t ms) { return after(std::chrono::milliseconds(ms)); }
  static Deadline at(Clock::time_point tp) { return Deadline(tp); }
  // For long timeouts (CHORUS_TIMEOUT, seconds): read from the coarse clock,
  // which costs 3 ns against 20 for the precise one on these VMs, a good part
  // of a latency-path call. The coarse clock is steady_clock's CLOCK_MONOTONIC
  // as of the kernel's last timekeeping update; seen lagging by up to 7.6 ms
  // here (ticks of 4 ms). kCoarseSlack covers that lag, so the deadline falls
  // at most kCoarseSlack + the lag after after(d), and earlier only if the
  // lag ever exceeds the slack.
  static constexpr std::chrono::milliseconds kCoarseSlack{20};
  static Deadline after_coarse(std::chrono::nanoseconds d) {
    return Deadline(coarse_now() + std::chrono::duration_cast<Clock::duration>(kCoarseSlack + d));
  }
  // The coarse clock's reading, on steady_clock's scale (see above: up to a
  // few ms behind Clock::now()).
  static Clock::time_point coarse_now() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    return Clock::time_point(std::chrono::duration_cast<Clock::duration>(
        std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec)));
  }

  Clock::time_point time_point() const { return tp_; }
  bool expired() const { return Clock::now() >= tp_; }
  std::chrono::nanoseconds remaining() const {
    return std::max(std::chrono::nanoseconds(0), tp_ - Clock::now());
  }
  // Remaining time in whole milliseconds for poll/epoll, rounded up, capped.
  int poll_timeout_ms(int cap_ms = 1000) const {
    auto ns = remaining().count();
    int64_t ms = (ns + 999999) / 1000000;
    return static_cast<int>(std::min<int64_t>(ms, cap_ms));
  }
  Deadline earlier(const Deadline& other) const { return tp_ < other.tp_ ? *this : other; }

 private:
  explicit Deadline(Clock::time_point tp) : tp_(tp) {}
  Clock::time_point tp_;
};

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace chorus
