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
// average). That is the evidence of a contended core, good for
// kContendedFor after the last sign of the task. While it holds, a yield
// asks for the short slice. Without it, a yield does not: the three system
// calls per wait, and the shorter turns among the job's own ranks, are not
// paid where nothing else competes. Measured, 4 ranks on 2 cores, 8-byte
// shared-memory allreduce: idle, 4-6 us with no short slice, 13-18 us
// shortening at every wait, 4-5 us with this rule; beside two spinning
// threads, 1.0-2.5 ms with no short slice, 0.24-0.28 ms with this rule at
// 1 ms (0.3-2.0 ms at 500 us, 0.24-0.83 ms at 2 ms) while waits still
// polled.
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
// without it (4.6-5.1 in the fourth).
constexpr unsigned kShortYieldsToClear = 64;
// From a sign of the task until a probe finds none, waits sleep at once
// (worth_polling). A probe is kProbeYields yields with the short slice, at
// one of which a CPU-bound task still on the core keeps it for half that
// slice or more. The first probe comes kFirstProbeGap after the sign, so
// that a peer busy for some milliseconds does not cost the small, fast calls
// that follow; the gap doubles with each probe that meets the task, up to
// kProbeEvery, so that a lasting task costs one short yield to it every
// kProbeEvery. A probe that finds no task ends the sleeping, not the
// evidence: unbound ranks and tasks move between cores, and a task that
// comes back takes one short slice, not its own, before waits sleep again.
// (Ending the evidence there cost a yield of over a millisecond 10-37 times
// in a 1.3-second run beside two matrix-multiply threads.)
constexpr unsigned kProbeYields = 8;
constexpr auto kFirstProbeGap = std::chrono::milliseconds(1);
constexpr auto kProbeEvery = std::chrono::milliseconds(128);

// Per thread: how deep in waits it is, the slice to restore when the
// outermost one ends (valid while `shortened`), until when the core is
// known to be contended, and whether its waits sleep at once and when to
// probe that.
struct SliceState {
  int depth = 0;
  bool shortened = false;
  SchedAttr saved{};
  Clock::time_point contended_until{};
  unsigned short_yields = 0;  // in a row, while the slice is short
  bool sleep_at_once = false;
  Clock::time_point last_probe{};
  Clock::duration probe_gap{};
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

// The next probe a doubled gap after `when`: the last one met the task, or
// found the core free wrongly.
void probe_later(SliceState& s, Clock::time_point when) {
  s.last_probe = when;
  s.probe_gap = std::min<Clock::duration>(2 * s.probe_gap, kProbeEvery);
}

// A sign of a CPU-bound task on this thread's core, seen at `when`.
void saw_task(SliceState& s, Clock::time_point when) {
  // Evidence that ran out counts for nothing, whether or not anything has
  // cleared it since (after a clean probe only short yields do, and a thread
  // that seldom waits makes few).
  if (s.contended_until == Clock::time_point{} || when >= s.contended_until) {
    s.probe_gap = kFirstProbeGap;
    s.last_probe = when;
  } else if (!s.sleep_at_once) {
    probe_later(s, when);  // a probe found the core free, wrongly
  }
  s.sleep_at_once = true;
  s.contended_until = when + kContendedFor;
  s.short_yields = 0;
}

// Yields the core, begun at `before`; `after` is when it came back. Whether
// a CPU-bound task held it up: for over half the short slice while that is
// asked for, else for a long yield.
bool yield_held_up(const SliceState& s, const Spin& spin, Clock::time_point before,
                   Clock::time_point& after) {
  sched_yield();
  after = Clock::now();
  const auto took = after - before;
  return took > kLongYield || (s.shortened && took >= std::chrono::microseconds(spin.slice_us) / 2);
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
  Clock::time_point after;
  if (yield_held_up(s, spin, before, after)) {
    saw_task(s, after);
  } else if (s.shortened && ++s.short_yields >= kShortYieldsToClear) {
    s.contended_until = {};
    s.sleep_at_once = false;
  }
}

bool worth_polling(const Spin& spin) {
  if (!spin.yield_each) return true;
  SliceState& s = slice_state;
  if (!s.sleep_at_once) return true;
  auto now = Clock::now();
  if (now >= s.contended_until) {
    s.contended_until = {};
    s.sleep_at_once = false;
    return true;
  }
  if (now - s.last_probe < s.probe_gap) return false;
  shorten_slice(s, spin.slice_us);
  for (unsigned i = 0; i < kProbeYields; ++i) {
    if (yield_held_up(s, spin, now, now)) {
      saw_task(s, now);
      probe_later(s, now);
      return false;
    }
  }
  s.sleep_at_once = false;
  return true;
}

bool core_contended() {
  const SliceState& s = slice_state;
  return s.contended_until != Clock::time_point{} && Clock::now() < s.contended_until;
}

std::chrono::nanoseconds next_probe_gap() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(slice_state.probe_gap);
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
