#include "base/core/wait_policy.hpp"

#include <linux/sched.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace chorus {
namespace {

// struct sched_attr of sched_setattr(2); glibc 2.36 has no wrapper.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
  uint32_t sched_util_min;
  uint32_t sched_util_max;
};

bool get_attr(SchedAttr& attr) {
  std::memset(&attr, 0, sizeof attr);
  return syscall(SYS_sched_getattr, 0, &attr, static_cast<unsigned>(sizeof attr), 0) == 0;
}

bool set_attr(SchedAttr attr) {
  attr.size = sizeof attr;
  attr.sched_flags = 0;
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}

using Clock = std::chrono::steady_clock;

// A yield that kept this thread off its core this long handed the core to a
// task that runs until its slice ends (a CPU-bound process, not a peer rank
// that soon waits itself; here a yield to a `yes` process cost 1.3 ms on
// average): from then on, for kContendedFor, waits that yield ask for the
// short slice. Without that evidence they do not, so the three system calls
// per wait, and the shorter turns among the job's own ranks, are not paid
// where nothing else competes. Measured, 4 ranks on 2 cores, 8-byte
// shared-memory allreduce: idle, 4-6 us with no short slice, 13-18 us
// shortening at every wait, 4-5 us with this rule (with now and then a run
// at 17-20 us); beside two spinning threads, 1.0-2.5 ms with no short slice,
// 0.24-0.28 ms with this rule at 1 ms (0.3-2.0 ms at 500 us, 0.24-0.83 ms at
// 2 ms).
constexpr auto kLongYield = std::chrono::milliseconds(1);
constexpr auto kContendedFor = std::chrono::seconds(1);
// A long yield may also have met a peer rank busy outside any call (starting
// up, measuring, computing): then the cores are not contended once it waits
// again, and the yields of short-slice waits come back at once. That many in
// a row, each under half the short slice, end the evidence (a CPU-bound task
// on the core takes its whole short slice at one of them). Measured, 4 ranks
// on 2 cores, chorus-bench measuring memcpy at startup (CPU-bound for some
// milliseconds on each rank) before 8 B-2 KiB allreduces, 4 interleaved
// runs: 2.9-6.2 us per op with this rule, 12-29 us in 3 of the 4 runs
// without it (4.6-5.1 in the fourth); beside two spinning threads or two
// matrix-multiply threads, medians over the runs and sizes 321 and 301 us
// with it, 264 and 283 us without (each spread over 0.1-2 ms).
constexpr unsigned kShortYieldsToClear = 64;

// Per thread: how deep in waits it is, the slice to restore when the
// outermost one ends (valid while `shortened`), and until when a long yield
// says the core is contended.
struct SliceState {
  int depth = 0;
  bool shortened = false;
  SchedAttr saved{};
  Clock::time_point contended_until{};
  unsigned short_yields = 0;  // in a row, while the slice is short
};
thread_local SliceState slice_state;

void shorten_slice(SliceState& s, int slice_us) {
  if (s.shortened || slice_us <= 0 || s.depth == 0) return;
  SchedAttr attr;
  if (!get_attr(attr)) return;
  // Only ordinary threads: a real-time or idle policy was chosen on purpose.
  if (attr.sched_policy != SCHED_NORMAL && attr.sched_policy != SCHED_BATCH) return;
  const uint64_t want = static_cast<uint64_t>(slice_us) * 1000;
  if (attr.sched_runtime != 0 && attr.sched_runtime <= want) return;  // already short
  s.saved = attr;
  attr.sched_runtime = want;
  s.shortened = set_attr(attr);
}

}  // namespace

void spin_step(const Spin& spin, unsigned& round) {
  ++round;
  if (!spin.yield_each) {
    cpu_relax();
    return;
  }
  SliceState& s = slice_state;
  const auto before = Clock::now();
  if (before < s.contended_until) shorten_slice(s, spin.slice_us);
  sched_yield();
  const auto after = Clock::now();
  const auto took = after - before;
  if (took > kLongYield) {
    s.contended_until = after + kContendedFor;
    s.short_yields = 0;
  } else if (s.shortened) {
    if (took >= std::chrono::microseconds(spin.slice_us) / 2)
      s.short_yields = 0;
    else if (++s.short_yields >= kShortYieldsToClear)
      s.contended_until = {};
  }
}

void WaitScope::enter() {
  ++slice_state.depth;
}

void WaitScope::leave() {
  SliceState& s = slice_state;
  if (--s.depth == 0 && s.shortened) {
    set_attr(s.saved);
    s.shortened = false;
  }
}

bool become_batch_thread() {
  SchedAttr attr;
  if (!get_attr(attr) || attr.sched_policy != SCHED_NORMAL) return false;
  attr.sched_policy = SCHED_BATCH;
  return set_attr(attr);
}

uint64_t current_sched_slice_ns() {
  SchedAttr attr;
  return get_attr(attr) ? attr.sched_runtime : 0;
}

}  // namespace chorus
