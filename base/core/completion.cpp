#include "base/core/completion.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

namespace chorus {

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds timeout) {
  struct timespec ts;
  ts.tv_sec = timeout.count() / 1000000000;
  ts.tv_nsec = timeout.count() % 1000000000;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, &ts, nullptr,
          0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
          nullptr, 0);
}

bool Completion::move(uint32_t from, uint32_t to) {
  uint32_t word = state_.load(std::memory_order_relaxed);
  do {
    if ((word & kStateMask) != from) return false;
  } while (!state_.compare_exchange_weak(word, (word & ~kStateMask) | to, std::memory_order_seq_cst,
                                         std::memory_order_relaxed));
  // Only the word's address from here: a waiter that saw the final state may
  // have freed the object already. While one sleeps it cannot have; one
  // whose sleep just timed out may, and then the wake finds no one (the
  // kernel only hashes a private futex's address).
  if (to >= kDone && word >= kSleeper) futex_wake_all(state_);
  return true;
}

void Completion::complete() {
  move(kPending, kDone);
}

void Completion::fail(std::exception_ptr error) {
  if (!move(kPending, kBusy)) return;
  error_ = std::move(error);
  move(kBusy, kFailed);
}

void Completion::rethrow_if_failed() const {
  if (failed() && error_) std::rethrow_exception(error_);
}

bool Completion::wait(const Deadline& deadline, const Spin& spin) {
  if (done()) return true;
  // What completes the flag is another thread of this process (the
  // communicator's worker, the fusion engine's thread), and with the rank
  // bound to one CPU it is queued on this very core: after a few pauses the
  // spin yields at every check, whatever the wait policy says for peers.
  // Measured, 2 bound ranks, 1000 fused 4 KiB tensors per step over shared
  // memory, 4 interleaved runs each: step medians 1674 us so, 2354 us
  // pausing only, 1693 us before the wait policy (runs of one kind spread
  // over 0.7-3.3 ms with the machine's moods).
  constexpr unsigned kPauses = 64;
  Spin yielding = spin;
  yielding.yield_each = true;
  WaitScope scope(yielding);
  // Polled even beside a CPU-bound task (wait_policy.hpp, worth_polling):
  // the thread it waits for may be a batch thread (the fusion engine's),
  // which a wake-up does not let preempt that task, while a yield lets it
  // run. Sleeping at once there cost 1000 fused 4 KiB tensors per step,
  // 2 ranks beside two matrix-multiply threads, 1.0-3.6 ms against 0.7-1.0.
  auto spin_end = Clock::now() + std::chrono::microseconds(spin.us);
  unsigned round = 0;
  while (Clock::now() < spin_end) {
    if (done()) return true;
    spin_step(round < kPauses ? spin : yielding, round);
  }
  while (true) {
    if (done()) return true;
    if (deadline.expired()) return false;
    // Counted in the word itself: a completion after this sees the sleeper
    // in its compare-exchange; one before it, the kernel sees in the word.
    const uint32_t word = state_.fetch_add(kSleeper, std::memory_order_seq_cst) + kSleeper;
    if ((word & kStateMask) < kDone)
      futex_wait(
          state_, word,
          std::min<std::chrono::nanoseconds>(deadline.remaining(), std::chrono::milliseconds(100)));
    state_.fetch_sub(kSleeper, std::memory_order_seq_cst);
  }
}

}  // namespace chorus
