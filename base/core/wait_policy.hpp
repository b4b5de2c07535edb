// How a thread waits for its peers: the policy every wait in Chorus follows
// (docs/architecture.md, "Waiting").
//
//   1. Poll with a CPU pause for Spin::us microseconds (CHORUS_SPIN_US): a
//      peer that is running answers within them.
//   2. Then sleep (futex, epoll) until woken or a health slice passes.
//
// A poll never hands its core to another task unless this host runs more of
// the job's ranks than it has cores (Spin::yield_each, CHORUS_WAIT_YIELD):
// then the awaited rank may be queued behind us on this core, and a yield at
// every check lets it run. Anywhere else a yield gives the core to whatever
// else is runnable for the rest of its time slice: beside a CPU-bound process
// that costs milliseconds (measured on 2 cores, two `yes` processes beside a
// 2-rank job: 8-byte shared-memory allreduce 2.0-2.6 ms yielding after 64
// pauses, 0.3-0.6 us pausing only). The exception is a wait for a thread of
// this process (Completion::wait): that thread is likely queued on this very
// core, so such a wait yields after 64 pauses whatever the host's ranks.
//
// While a wait yields, the thread asks the scheduler for a short time slice
// (Spin::slice_us, CHORUS_WAIT_SLICE_US; Linux 6.12 and later honour it for
// ordinary threads): a CPU-bound task it yielded to must then give the core
// back within that slice, not its own. The thread's own slice is restored
// when the wait ends (WaitScope), so a caller's compute is not affected.
#pragma once

#include <chrono>
#include <cstdint>

namespace chorus {

struct Spin {
  int us = 0;               // poll this long before sleeping
  bool yield_each = false;  // oversubscribed: yield the core at every check
  int slice_us = 0;         // while yielding, ask for this scheduler slice (0: don't)
  Spin(int us_ = 0, bool yield_each_ = false, int slice_us_ = 0)  // NOLINT
      : us(us_), yield_each(yield_each_), slice_us(slice_us_) {}
};

// Relax the CPU for one poll round (a pause; never a yield).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// One round of a polling wait: a pause, or with Spin::yield_each a yield
// (with the short slice, see above). Counts the rounds.
void spin_step(const Spin& spin, unsigned& round);

// Whether a wait that starts now should poll before it sleeps. False while a
// spin that yields (Spin::yield_each) has recent evidence of a CPU-bound
// task on this thread's core (a yield that kept it off the core for over a
// millisecond): then the wait sleeps at once, because a futex or epoll
// wake-up preempts such a task within tens of microseconds, where a yield
// hands it the core for its slice. Now and then a probe (a few yields)
// tests the evidence, and lets waits poll again once the task has gone.
// Always true for a spin that only pauses.
bool worth_polling(const Spin& spin);

// Whether this thread holds evidence of a CPU-bound task on its core (for
// tests: a probe that lets waits poll again keeps it, while it lasts).
bool core_contended();
// How long after the last probe (or the first sign) this thread's next probe
// comes (for tests).
std::chrono::nanoseconds next_probe_gap();

// Brackets one wait that polls as `spin` says: restores the thread's
// scheduler slice on leaving the outermost scope if spin_step shortened it
// inside. Only a yielding spin can shorten it; for any other the scope is one
// inline test. (Entering the scope on every wait, a thread-local counter, cost
// the 2-rank shared-memory allreduce 1.6-1.8x at 512 KiB-8 MiB on idle cores,
// through the code it added to every wait of the pipeline; measured, not
// understood.)
class WaitScope {
 public:
  explicit WaitScope(const Spin& spin) : active_(spin.yield_each && spin.slice_us > 0) {
    if (active_) enter();
  }
  ~WaitScope() {
    if (active_) leave();
  }
  WaitScope(const WaitScope&) = delete;
  WaitScope& operator=(const WaitScope&) = delete;

 private:
  static void enter();
  static void leave();
  const bool active_;
};

// The scheduler slice (ns) this thread asks for, as sched_getattr reports it
// (0 where the kernel reports none); for tests.
uint64_t current_sched_slice_ns();

// Makes the calling thread, if it is an ordinary one (SCHED_OTHER), a batch
// thread (SCHED_BATCH: the same weight, so the same share of a contended
// core): woken, it no longer preempts the task running on its core, but runs
// when that task blocks, yields or ends its slice. For a library thread that
// the caller's own calls wake, on the caller's core, for work the caller
// will usually do itself moments later (the fusion engine's thread: see
// docs/architecture.md, "Tensor fusion"). False when the thread keeps its
// policy (a real-time or idle policy chosen on purpose, or a refusal).
bool become_batch_thread();

}  // namespace chorus
