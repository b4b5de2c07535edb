// chorus-sim's virtual clock (tools/sim/net_clock.hpp), its transport, and
// the model check: the real ring and recursive-doubling allreduce, run on
// the simulated world, take the time their closed forms give.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <limits>

#include "base/core/contract.hpp"
#include "tools/sim/net_clock.hpp"
#include "tools/sim/sim_run.hpp"
#include "tools/sim/sim_transport.hpp"

using namespace chorus;
using namespace chorus::sim;

namespace {

NetParams params() {
  NetParams p;
  p.intra = {1.0, 0.001};  // 1 us, 1 GB/s
  p.inter = {10.0, 0.01};  // 10 us, 100 MB/s
  p.reduce_us_per_byte = 0.002;
  return p;
}

}  // namespace

TEST_CASE("sim clock: a single send on an idle link", "[sim]") {
  NetClock clock(params(), {0, 1});
  CHECK(clock.send(0, 1, 5.0, 1000) == Approx(5.0 + 10.0 + 10.0));
  NetClock local(params(), {0, 0});
  CHECK(local.send(0, 1, 5.0, 1000) == Approx(5.0 + 1.0 + 1.0));
}

TEST_CASE("sim clock: two sends through one host link are serialised", "[sim]") {
  NetClock clock(params(), {0, 0, 1, 1});
  CHECK(clock.send(0, 2, 0.0, 1000) == Approx(20.0));  // [0, 10) on host 0's egress
  CHECK(clock.send(1, 3, 0.0, 1000) == Approx(30.0));  // waits for it: [10, 20)
  // The ingress of host 1 serialises too: a third host sending to it.
  NetClock in(params(), {0, 1, 2});
  CHECK(in.send(0, 1, 0.0, 1000) == Approx(20.0));
  CHECK(in.send(2, 1, 0.0, 1000) == Approx(30.0));
  // Within a host, nothing is contended.
  CHECK(clock.send(0, 1, 0.0, 1000) == Approx(2.0));
  // reset() frees the links.
  clock.reset();
  CHECK(clock.send(1, 3, 0.0, 1000) == Approx(20.0));
}

TEST_CASE("sim clock: a message fills the gaps before later bookings and goes on after", "[sim]") {
  LinkCalendar cal;
  cal.book(100, 10);
  CHECK(cal.free_from(0) == Approx(0));
  CHECK(cal.free_from(105) == Approx(110));
  CHECK(cal.busy_after(0) == Approx(100));
  CHECK(cal.busy_after(100) == std::numeric_limits<double>::infinity());
  cal.book(110, 5);  // touches: one interval [100, 115)
  CHECK(cal.intervals() == 1);
  CHECK(cal.free_from(100) == Approx(115));

  // Hosts 0 and 1, ranks 0/1 on host 0, 2/3 on host 1; 1000 B take 10 us.
  NetClock clock(params(), {0, 0, 1, 1});
  CHECK(clock.send(0, 2, 30.0, 1000) == Approx(50.0));  // [30, 40) on both links
  // Sent at 0: [0, 10) fits before it.
  CHECK(clock.send(1, 3, 0.0, 1000) == Approx(20.0));
  // Sent at 25: 5 us in [25, 30), the other 5 after the first message.
  CHECK(clock.send(0, 3, 25.0, 1000) == Approx(45.0 + 10.0));
  // The other direction is free: host 1's egress, host 0's ingress.
  CHECK(clock.send(2, 0, 25.0, 1000) == Approx(45.0));
  // A stretch must be free on both links at once: host 0's egress is busy
  // in [0, 10) and [25, 45); host 1's ingress too, so from 5 on the first
  // common free stretch is [10, 25), then [45, ...).
  CHECK(clock.send(1, 2, 5.0, 2000) == Approx(45.0 + 5.0 + 10.0));
}

TEST_CASE("sim transport: a receive waits for its message, not the other way round", "[sim]") {
  // Ranks 0 and 1 on host 0, rank 2 on host 1.
  auto fabric = std::make_shared<SimFabric>(params(), std::vector<int>{0, 0, 1});
  fabric->reset(1);
  SimTransport t0(fabric, 0), t1(fabric, 1), t2(fabric, 2);
  CallSignature sig;
  sig.kind = static_cast<uint8_t>(CollectiveKind::broadcast);  // not reducing: no gamma
  std::vector<std::byte> big(1000), small(10), in_big(1000), in_small(10);
  const auto deadline = Deadline::after(std::chrono::seconds(10));
  // Rank 1 receives 1000 B from rank 2 (other host: 10 + 10 us) and 10 B
  // from rank 0 (same host: 1 + 0.01 us). Both sent at t = 0.
  auto r_big = t1.irecv(2, 7, sig, in_big);
  auto r_small = t1.irecv(0, 7, sig, in_small);
  t2.isend(1, 7, sig, big);
  t0.isend(1, 7, sig, small);
  wait_one(t1, r_small, deadline, Spin{0}, "small");
  CHECK(fabric->clock(1) == Approx(1.01));
  wait_one(t1, r_big, deadline, Spin{0}, "big");
  CHECK(fabric->clock(1) == Approx(20.0));
  // A message that arrived long ago does not move a later clock back; a
  // reducing call charges gamma per byte received.
  sig.kind = static_cast<uint8_t>(CollectiveKind::allreduce);
  t0.isend(1, 8, sig, small);
  auto r = t1.irecv(0, 8, sig, in_small);
  wait_one(t1, r, deadline, Spin{0}, "late");
  CHECK(fabric->clock(1) == Approx(20.0 + 10 * 0.002));
  // ... except a receive into the call's output (a copy, not an operand).
  t1.set_output(in_small);
  t0.isend(1, 8, sig, small);
  auto copy = t1.irecv(0, 8, sig, in_small);
  wait_one(t1, copy, deadline, Spin{0}, "copy");
  CHECK(fabric->clock(1) == Approx(20.0 + 10 * 0.002));
  // The scale makes each byte count as many.
  fabric->reset(100);
  t2.isend(0, 9, sig, small);  // 1000 virtual bytes
  auto r2 = t0.irecv(2, 9, sig, in_small);
  wait_one(t0, r2, deadline, Spin{0}, "scaled");
  CHECK(fabric->clock(0) == Approx(10.0 + 10.0 + 1000 * 0.002));
}

TEST_CASE("sim placement: slot fills host after host, node deals round-robin", "[sim]") {
  CHECK(place(6, 3, "slot") == std::vector<int>{0, 0, 1, 1, 2, 2});
  CHECK(place(6, 3, "node") == std::vector<int>{0, 1, 2, 0, 1, 2});
  CHECK(place(5, 2, "slot") == std::vector<int>{0, 0, 0, 1, 1});
}

TEST_CASE("sim runs every allreduce algorithm on unequal hosts, placed round-robin", "[sim]") {
  World w;
  w.host_of_rank = place(7, 3, "node");  // 3, 2 and 2 ranks
  std::vector<const AlgorithmSpec*> algos;
  for (const auto* a : algorithms_for(CollectiveKind::allreduce)) algos.push_back(a);
  const auto results = simulate_allreduce(w, {8, 4096, 1 << 20}, algos);
  for (const auto& r : results) {
    for (const auto& a : r.algos) {
      INFO(a.spec->name << " at " << r.bytes << ": " << a.error);
      CHECK(a.error.empty());
      CHECK((!a.refusal.empty() || a.time_us > 0));
    }
    CHECK(r.tuned);
    CHECK(r.best());
  }
}

namespace {

double simulated(const std::string& algo, int n, std::size_t bytes, std::size_t max_real) {
  World w;
  w.host_of_rank = place(n, n, "slot");
  w.net = params();
  w.max_real_bytes = max_real;
  w.segment_bytes = bytes;  // one segment per message: no pipelining
  const auto* spec = find_algorithm(CollectiveKind::allreduce, algo);
  REQUIRE(spec);
  const auto results = simulate_allreduce(w, {bytes}, {spec});
  REQUIRE(results.size() == 1);
  const AlgoTime& t = results[0].algos[0];
  INFO(t.refusal << t.error);
  REQUIRE(t.refusal.empty());
  REQUIRE(t.error.empty());
  return t.time_us;
}

}  // namespace

TEST_CASE("sim model check: ring allreduce takes 2(n-1)(alpha + B/(n beta)) + (n-1)B/n gamma",
          "[sim]") {
  const NetParams p = params();
  for (auto [n, bytes, max_real] :
       {std::tuple<int, std::size_t, std::size_t>{8, 32768, 1 << 20}, {16, 64 << 20, 256 << 10}}) {
    const double b = static_cast<double>(bytes) / n;
    const double expected = 2.0 * (n - 1) * (p.inter.alpha_us + b * p.inter.us_per_byte) +
                            (n - 1) * b * p.reduce_us_per_byte;
    INFO("n " << n << " bytes " << bytes);
    CHECK(std::abs(simulated("ring", n, bytes, max_real) / expected - 1) < 0.01);
  }
}

TEST_CASE("sim model check: recursive doubling takes log2(n)(alpha + B/beta + B gamma)", "[sim]") {
  const NetParams p = params();
  for (auto [n, bytes, max_real] :
       {std::tuple<int, std::size_t, std::size_t>{8, 4096, 1 << 20}, {32, 1 << 20, 64 << 10}}) {
    const double b = static_cast<double>(bytes);
    const double expected =
        std::log2(n) * (p.inter.alpha_us + b * p.inter.us_per_byte + b * p.reduce_us_per_byte);
    INFO("n " << n << " bytes " << bytes);
    CHECK(std::abs(simulated("recursive_doubling", n, bytes, max_real) / expected - 1) < 0.01);
  }
}
