// A one-shot completion flag that a waiter can spin on briefly and then sleep
// on (futex), so that ranks outnumbering cores do not burn CPU.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>

#include "base/core/deadline.hpp"
#include "base/core/wait_policy.hpp"

namespace chorus {

class Completion {
 public:
  // Not while fail() is storing its error (kBusy): a waiter let through then
  // would find no error and take the failure for a success.
  bool done() const { return (state_.load(std::memory_order_acquire) & kStateMask) >= kDone; }
  bool failed() const { return (state_.load(std::memory_order_acquire) & kStateMask) == kFailed; }
  // Exactly one of complete()/fail() takes effect; later calls are ignored.
  // Neither touches the object after the atomic operation that makes it
  // done, so a waiter that sees it done may free it at once.
  void complete();
  void fail(std::exception_ptr error);
  // Rethrows the stored error, if any. Only valid once done().
  void rethrow_if_failed() const;
  std::exception_ptr error() const { return failed() ? error_ : nullptr; }

  // Waits until done or the deadline passes (returns false then): polls as
  // `spin` says (wait_policy.hpp), then sleeps on the flag.
  bool wait(const Deadline& deadline, const Spin& spin);

 private:
  // state_: the state in its low two bits, the number of waiters asleep on
  // the word above them (kSleeper each). One word, so that the thread that
  // completes learns from its own compare-exchange whether anyone sleeps.
  static constexpr uint32_t kPending = 0, kBusy = 1, kDone = 2, kFailed = 3;
  static constexpr uint32_t kStateMask = 3, kSleeper = 4;
  // Moves the state from `from` to `to`, keeping the sleepers; false (and
  // nothing changed) when the state was not `from`. Wakes the sleepers when
  // `to` is final.
  bool move(uint32_t from, uint32_t to);

  std::atomic<uint32_t> state_{kPending};
  std::exception_ptr error_;
};

// Sleep on a 32-bit word until it differs from expected, a wake, or timeout.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds timeout);
void futex_wake_all(std::atomic<uint32_t>& word);

}  // namespace chorus
