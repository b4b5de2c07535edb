// A one-shot completion flag that a waiter can spin on briefly and then sleep
// on (futex), so that ranks outnumbering cores do not burn CPU.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>

#include "base/core/deadline.hpp"

namespace chorus {

class Completion {
 public:
  bool done() const { return state_.load(std::memory_order_acquire) != kPending; }
  bool failed() const { return state_.load(std::memory_order_acquire) == kFailed; }
  // Exactly one of complete()/fail() takes effect; later calls are ignored.
  void complete();
  void fail(std::exception_ptr error);
  // Rethrows the stored error, if any. Only valid once done().
  void rethrow_if_failed() const;
  std::exception_ptr error() const { return failed() ? error_ : nullptr; }

  // Waits until done or the deadline passes (returns false then): spins for
  // spin_us microseconds (pause, then yield), then sleeps on the flag.
  bool wait(const Deadline& deadline, int spin_us);

 private:
  static constexpr uint32_t kPending = 0, kBusy = 1, kDone = 2, kFailed = 3;
  bool claim();
  void publish(uint32_t state);

  std::atomic<uint32_t> state_{kPending};
  std::atomic<uint32_t> sleepers_{0};
  std::exception_ptr error_;
};

// Sleep on a 32-bit word until it differs from expected, a wake, or timeout.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds timeout);
void futex_wake_all(std::atomic<uint32_t>& word);

// Relax the CPU in a spin loop; after many rounds, yield the core.
void spin_pause(unsigned round);

// How a waiter spins before it sleeps: for `us` microseconds, pausing and then
// yielding (spin_pause); or, when ranks outnumber cores (yield_each), yielding
// the core at every check, because the rank it waits for may be waiting for
// this core (measured on 2 cores: 4 ranks over TCP 31-34 us per 8-byte
// allreduce against 41-51 us pausing first).
struct Spin {
  int us = 0;
  bool yield_each = false;
  Spin(int us_ = 0, bool yield_each_ = false) : us(us_), yield_each(yield_each_) {}  // NOLINT
};

// One step of a spinning wait (see Spin); counts the rounds.
void spin_step(const Spin& spin, unsigned& round);

}  // namespace chorus
