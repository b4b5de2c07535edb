// Deadlines: the coarse-clock form used for CHORUS_TIMEOUT falls after the
// precise one (its slack covers the coarse clock's lag) and not much later.
#include <catch2/catch.hpp>

#include <chrono>

#include "lib/core/deadline.hpp"

using namespace chorus;
using namespace std::chrono_literals;

TEST_CASE("after_coarse lies within its slack after after(d)", "[deadline]") {
  for (auto d : {0ns, std::chrono::nanoseconds(1ms), std::chrono::nanoseconds(30s)}) {
    for (int i = 0; i < 1000; ++i) {
      const Deadline before = Deadline::after(d);
      const Deadline coarse = Deadline::after_coarse(d);
      const Deadline after = Deadline::after(d);
      INFO("d " << d.count() << " ns, try " << i);
      // The coarse clock never runs ahead of the precise one.
      REQUIRE(coarse.time_point() <= after.time_point() + Deadline::kCoarseSlack);
      // It lags by less than the slack unless timekeeping stalled (seen up to 7.6 ms).
      REQUIRE(coarse.time_point() >= before.time_point());
    }
  }
  CHECK_FALSE(Deadline::after_coarse(1h).expired());
  CHECK(Deadline::after_coarse(1h).remaining() > 59min);
}
