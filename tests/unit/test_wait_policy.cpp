// The wait policy (base/core/wait_policy.hpp): a yielding wait that meets a
// CPU-bound task on its core asks for the short scheduler slice, gives the
// thread its own slice back when the wait ends, and stops asking once yields
// come back at once again; while the task is there, waits sleep at once.
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "base/core/wait_policy.hpp"

using namespace chorus;

namespace {

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

int current_cpu_allowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) != 0) return -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) return c;
  return -1;
}

// A CPU-bound task: a thread spinning on `cpu` until destroyed.
class Hog {
 public:
  explicit Hog(int cpu)
      : thread_([this, cpu] {
          pin_to(cpu);
          while (!stop_.load(std::memory_order_relaxed)) {
          }
        }) {}
  Hog(const Hog&) = delete;
  Hog& operator=(const Hog&) = delete;
  ~Hog() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};  // before thread_, which reads it
  std::thread thread_;
};

// Yielding waits beside a hog until one finds the evidence and the next
// would sleep at once (bounded: 5 s); whether that happened.
bool wait_until_sleeping(const Spin& yielding) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < give_up) {
    WaitScope scope(yielding);
    unsigned round = 0;
    spin_step(yielding, round);
    if (!worth_polling(yielding)) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("wait policy: a pausing spin never touches the scheduler", "[wait]") {
  // Beside a CPU-bound thread on the same CPU, where any yield would be held
  // up and leave evidence of it: a pausing spin leaves none, and the slice
  // stays the thread's own.
  const int cpu = current_cpu_allowed();
  REQUIRE(cpu >= 0);
  bool pinned = false, contended = true;
  unsigned round = 0;
  uint64_t before = 0, inside = 0, after = 0;
  std::thread worker([&] {
    if (!(pinned = pin_to(cpu))) return;
    Hog hog(cpu);
    before = current_sched_slice_ns();
    {
      const Spin spin{50, false, 100};
      WaitScope scope(spin);
      for (int i = 0; i < 1000; ++i) spin_step(spin, round);
      inside = current_sched_slice_ns();
    }
    after = current_sched_slice_ns();
    contended = core_contended();
  });
  worker.join();
  REQUIRE(pinned);
  CHECK(round == 1000);
  CHECK_FALSE(contended);
  CHECK(inside == before);
  CHECK(after == before);
}

TEST_CASE("wait policy: yielding to a CPU-bound task shortens the slice for the wait only",
          "[wait]") {
  // Both threads on one CPU: the test thread's yields hand the core to the
  // spinning one, which keeps it until its slice ends.
  const int cpu = current_cpu_allowed();
  REQUIRE(cpu >= 0);
  // Catch's assertions from one thread at a time: the main thread only joins.
  std::thread worker([cpu] {
    if (!pin_to(cpu)) {
      FAIL_CHECK("cannot pin the test thread to CPU " << cpu);
      return;
    }
    const uint64_t original = current_sched_slice_ns();
    if (original == 0) {
      WARN(
          "this kernel reports no scheduler slice for ordinary threads (before Linux 6.12): "
          "the short slice cannot be observed here");
      return;
    }
    auto hog = std::make_unique<Hog>(cpu);
    bool shortened = false;
    {
      const Spin spin{50, true, 100};
      WaitScope scope(spin);
      unsigned round = 0;
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!shortened && std::chrono::steady_clock::now() < give_up) {
        spin_step(spin, round);
        shortened = current_sched_slice_ns() == 100'000;
      }
      // Nested waits keep it; only the outermost restores.
      { WaitScope inner(spin); }
      if (shortened) CHECK(current_sched_slice_ns() == 100'000);
    }
    hog.reset();
    INFO("slice before " << original << " ns");
    CHECK(shortened);
    CHECK(current_sched_slice_ns() == original);
    // The hog is gone: yields come back at once, and after a run of them a
    // wait no longer shortens the slice (the evidence is cleared; it would
    // otherwise last a second). Another process on this CPU (tests run two
    // at a time) can hold a yield up and renew the evidence: up to three
    // runs of yields, all well within that second.
    if (shortened) {
      const Spin spin{50, true, 100};
      bool stayed = false;
      for (int attempt = 0; attempt < 3 && !stayed; ++attempt) {
        {
          WaitScope scope(spin);
          unsigned round = 0;
          for (int i = 0; i < 256; ++i) spin_step(spin, round);
        }
        stayed = true;
        WaitScope scope(spin);
        unsigned round = 0;
        for (int i = 0; i < 16; ++i) {
          spin_step(spin, round);
          stayed = stayed && current_sched_slice_ns() == original;
        }
      }
      CHECK(stayed);
    }
  });
  worker.join();
}

namespace {

// One run of a waiting thread pinned beside a CPU-bound one, then alone.
struct BesideHog {
  bool polled_first = false;                   // before any evidence
  bool sleeping = false;                       // evidence found by a wait's yields
  int waits_beside = 0;                        // waits while the hog ran
  int polled_beside = 0;                       // ... that polled
  bool pausing_polled = true;                  // a spin that only pauses: always polls
  bool polling_again = false;                  // after the hog stopped
  bool by_probe = false;                       // ... with the evidence still held
  std::chrono::steady_clock::duration took{};  // from the hog's end to then

  bool ok() const {
    return polled_first && sleeping && waits_beside > 10 && polled_beside * 4 < waits_beside &&
           pausing_polled && polling_again && by_probe;
  }
};

BesideHog wait_beside_hog(int cpu) {
  using Clock = std::chrono::steady_clock;
  BesideHog r;
  const Spin yielding{50, true, 100};
  const Spin pausing{50, false, 100};
  r.polled_first = worth_polling(yielding);
  auto hog = std::make_unique<Hog>(cpu);
  // A wait that yields to the hog finds the evidence.
  r.sleeping = wait_until_sleeping(yielding);
  // While the hog runs, waits mostly sleep at once. A probe among them (the
  // first 1 ms after the evidence, then at growing gaps) that finds the core
  // free lets the next waits poll, whose yields (with the short slice) meet
  // the hog again.
  const auto beside_until = Clock::now() + std::chrono::milliseconds(200);
  while (r.sleeping && Clock::now() < beside_until) {
    {
      WaitScope scope(yielding);
      if (worth_polling(yielding)) {
        ++r.polled_beside;
        unsigned round = 0;
        const auto poll_until = Clock::now() + std::chrono::microseconds(yielding.us);
        while (Clock::now() < poll_until) spin_step(yielding, round);
      }
      r.pausing_polled = r.pausing_polled && worth_polling(pausing);
      ++r.waits_beside;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // the wait's sleep
  }
  hog.reset();
  // The hog is gone: a probe finds the core free, and waits poll again while
  // the evidence still holds (it would run out by itself a second after its
  // last sign, and end the sleeping with it).
  const auto after_hog = Clock::now();
  while (!r.polling_again && Clock::now() < after_hog + std::chrono::seconds(5)) {
    WaitScope scope(yielding);
    r.polling_again = worth_polling(yielding);
    if (!r.polling_again) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  r.by_probe = r.polling_again && core_contended();
  r.took = Clock::now() - after_hog;
  return r;
}

}  // namespace

TEST_CASE("wait policy: beside a CPU-bound task waits sleep at once, and poll once it has gone",
          "[wait]") {
  const int cpu = current_cpu_allowed();
  REQUIRE(cpu >= 0);
  BesideHog r;
  int attempts = 0;
  std::thread worker([&] {
    if (!pin_to(cpu)) return;
    // Other processes on this CPU (tests run two at a time) can take it
    // from a probe, or hold the evidence up: up to three tries. Each starts
    // with waits that poll: the last one ended with them polling again.
    while (attempts < 3 && !r.ok()) {
      ++attempts;
      r = wait_beside_hog(cpu);
    }
  });
  worker.join();
  INFO("the test thread could not be pinned to CPU " << cpu << " when attempts is 0");
  REQUIRE(attempts > 0);
  using Ms = std::chrono::duration<double, std::milli>;
  const double took_ms = std::chrono::duration_cast<Ms>(r.took).count();
  INFO(attempts << " attempt(s); the last: " << r.polled_beside << " of " << r.waits_beside
                << " waits beside the hog polled, polling again " << took_ms
                << " ms after it stopped");
  CHECK(r.polled_first);
  CHECK(r.sleeping);
  CHECK(r.waits_beside > 10);
  CHECK(r.polled_beside * 4 < r.waits_beside);
  CHECK(r.pausing_polled);
  CHECK(r.polling_again);
  CHECK(r.by_probe);
}

namespace {

// Evidence that runs out unnoticed (a thread that waits seldom after a clean
// probe): a CPU-bound task met again later is a new sign, whose first probe
// comes 1 ms after it, not after a gap doubled from the old evidence's.
// Whether the run got that far (the hogs met on `cpu`), and the gap then.
struct StaleEvidence {
  bool sleeping = false;     // the first hog's evidence
  bool probed_free = false;  // a clean probe after it stopped
  bool ran_out = false;      // the evidence a second later
  bool found_again = false;  // the second hog's sign
  std::chrono::nanoseconds gap_before{}, gap_after{};
  bool ran() const { return sleeping && probed_free && ran_out && found_again; }
};

StaleEvidence evidence_found_again(int cpu) {
  using Clock = std::chrono::steady_clock;
  StaleEvidence r;
  const Spin yielding{50, true, 100};
  {
    Hog hog(cpu);
    r.sleeping = wait_until_sleeping(yielding);
    // Waits beside it for a while: the probes that meet it double the gap.
    const auto beside_until = Clock::now() + std::chrono::milliseconds(50);
    while (r.sleeping && Clock::now() < beside_until) {
      WaitScope scope(yielding);
      worth_polling(yielding);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  const auto give_up = Clock::now() + std::chrono::seconds(5);
  while (r.sleeping && !r.probed_free && Clock::now() < give_up) {
    WaitScope scope(yielding);
    r.probed_free = worth_polling(yielding) && core_contended();
    if (!r.probed_free) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  r.gap_before = next_probe_gap();
  // No wait for longer than the evidence lasts (a second).
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  r.ran_out = !core_contended();
  {
    Hog hog(cpu);
    const auto again_until = Clock::now() + std::chrono::seconds(5);
    while (r.probed_free && !r.found_again && Clock::now() < again_until) {
      WaitScope scope(yielding);
      unsigned round = 0;
      spin_step(yielding, round);
      r.found_again = core_contended();
    }
    r.gap_after = next_probe_gap();
  }
  return r;
}

}  // namespace

TEST_CASE(
    "wait policy: evidence that ran out unnoticed counts as new: its first probe comes 1 ms "
    "after the next sign",
    "[wait]") {
  const int cpu = current_cpu_allowed();
  REQUIRE(cpu >= 0);
  StaleEvidence r;
  int attempts = 0;
  std::thread worker([&] {
    if (!pin_to(cpu)) return;
    while (attempts < 3 && !r.ran()) {  // another process on the CPU can spoil a run
      ++attempts;
      r = evidence_found_again(cpu);
    }
  });
  worker.join();
  INFO("the test thread could not be pinned to CPU " << cpu << " when attempts is 0");
  REQUIRE(attempts > 0);
  INFO(attempts << " attempt(s); gap before " << r.gap_before.count() << " ns, after "
                << r.gap_after.count() << " ns");
  REQUIRE(r.sleeping);
  REQUIRE(r.probed_free);
  REQUIRE(r.ran_out);
  REQUIRE(r.found_again);
  CHECK(r.gap_after == std::chrono::milliseconds(1));
}

TEST_CASE("wait policy: a batch thread keeps its weight and gives up wake-up preemption only",
          "[wait]") {
  int policy_after = -1, nice_before = 0, nice_after = 0;
  bool became = false;
  std::thread helper([&] {
    nice_before = getpriority(PRIO_PROCESS, 0);
    became = become_batch_thread();
    policy_after = sched_getscheduler(0);
    nice_after = getpriority(PRIO_PROCESS, 0);
  });
  helper.join();
  CHECK(became);
  CHECK(policy_after == SCHED_BATCH);
  CHECK(nice_after == nice_before);
  // The caller's own thread is untouched, and a thread that is a batch
  // thread already is left as it is.
  CHECK(sched_getscheduler(0) == SCHED_OTHER);
  std::thread twice([&] {
    become_batch_thread();
    became = become_batch_thread();
    policy_after = sched_getscheduler(0);
  });
  twice.join();
  CHECK_FALSE(became);
  CHECK(policy_after == SCHED_BATCH);
}
