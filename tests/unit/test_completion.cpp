// The one-shot completion flag (base/core/completion.hpp): the verdict a
// waiter sees, and that the completing thread touches the flag no more once
// it is done, so that a waiter may free it at once (the fusion engine lends
// the C API's requests so; under ASan a touch after that is a
// use-after-free report).
#include <catch2/catch.hpp>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "base/core/completion.hpp"

using namespace chorus;

namespace {

const Spin kSleepAtOnce{0, false, 0};  // no polling: straight to the futex
const Spin kPollFirst{200, false, 0};  // polls 200 us, then sleeps

}  // namespace

TEST_CASE("completion: a failure is seen as a failure, with its error", "[completion]") {
  Completion c;
  CHECK_FALSE(c.done());
  c.fail(std::make_exception_ptr(std::runtime_error("peer 3 died")));
  c.complete();  // ignored: the first verdict stands
  REQUIRE(c.done());
  CHECK(c.failed());
  CHECK_THROWS_WITH(c.rethrow_if_failed(), "peer 3 died");
  Completion ok;
  ok.complete();
  ok.fail(std::make_exception_ptr(std::runtime_error("late")));
  CHECK(ok.done());
  CHECK_FALSE(ok.failed());
  CHECK_NOTHROW(ok.rethrow_if_failed());
}

TEST_CASE("completion: a waiter may free the flag as soon as it is done", "[completion]") {
  // Waiters that sleep and waiters that poll, against completions and
  // failures made at once or after a moment; each waiter frees the flag the
  // moment its wait returns.
  for (const Spin& spin : {kSleepAtOnce, kPollFirst}) {
    for (int round = 0; round < 300; ++round) {
      auto* c = new Completion;
      std::atomic<bool> started{false};
      std::thread finisher([&, c] {
        while (!started.load()) std::this_thread::yield();
        if (round % 3 == 1) std::this_thread::sleep_for(std::chrono::microseconds(300));
        if (round % 2)
          c->fail(std::make_exception_ptr(std::runtime_error("failed")));
        else
          c->complete();
      });
      started = true;
      REQUIRE(c->wait(Deadline::after_ms(10000), spin));
      const bool failed = c->failed();
      delete c;
      finisher.join();
      CHECK(failed == (round % 2 == 1));
    }
  }
}

TEST_CASE("completion: a wait that times out reports it and leaves the flag pending",
          "[completion]") {
  Completion c;
  const Deadline deadline = Deadline::after_ms(30);
  CHECK_FALSE(c.wait(deadline, kSleepAtOnce));
  CHECK(deadline.expired());  // it gave up at its deadline, not before
  CHECK_FALSE(c.done());
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    c.complete();
  });
  CHECK(c.wait(Deadline::after_ms(10000), kSleepAtOnce));
  later.join();
}
