// Deadlines: the coarse-clock form used for CHORUS_TIMEOUT never falls before
// the precise one would minus its lag, and its slack covers the coarse clock's
// resolution with room to spare. The lag itself is timing, so it is bounded
// only statistically: a VM may stall timekeeping now and then (seen: 7.6 ms).
#include <time.h>

#include <catch2/catch.hpp>

#include <chrono>

#include "base/core/deadline.hpp"

using namespace chorus;
using namespace std::chrono_literals;

TEST_CASE("after_coarse lies within its slack after after(d)", "[deadline]") {
  // The coarse clock ticks at its resolution; the slack must cover a tick twice.
  timespec res{};
  REQUIRE(clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0);
  const auto tick = std::chrono::seconds(res.tv_sec) + std::chrono::nanoseconds(res.tv_nsec);
  INFO("coarse clock resolution " << tick.count() << " ns");
  CHECK(2 * tick <= Deadline::kCoarseSlack);

  constexpr int kTries = 1000;
  for (auto d : {0ns, std::chrono::nanoseconds(1ms), std::chrono::nanoseconds(30s)}) {
    int lagging = 0;
    for (int i = 0; i < kTries; ++i) {
      const Deadline before = Deadline::after(d);
      const Deadline coarse = Deadline::after_coarse(d);
      const Deadline after = Deadline::after(d);
      INFO("d " << d.count() << " ns, try " << i);
      // The coarse clock never runs ahead of the precise one.
      REQUIRE(coarse.time_point() <= after.time_point() + Deadline::kCoarseSlack);
      // Its lag stays below the slack but for rare stalls of timekeeping.
      lagging += coarse.time_point() < before.time_point();
    }
    INFO("d " << d.count() << " ns: " << lagging << " of " << kTries << " lagged past the slack");
    CHECK(lagging <= kTries / 100);
  }
  CHECK_FALSE(Deadline::after_coarse(1h).expired());
  CHECK(Deadline::after_coarse(1h).remaining() > 59min);
}
