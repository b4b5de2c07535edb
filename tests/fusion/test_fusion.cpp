// The fusion engine through the C API, on thread ranks (tests/api/
// api_harness.hpp) over shared memory, TCP and UCX: named tensors submitted
// in a different order on every rank, results against a reference computed
// here (fusion_plan.hpp); the cached negotiation; tensors that lie back to
// back; the engine's thread and its rounds with nothing pending; names
// forgotten and kept; tensors nobody waits for (only chorus_test); the C++
// form. The verdicts (a tensor one rank never submits, a rank that destroys
// its communicator, a mismatch), the local refusals and compression:
// test_fusion_failures.cpp.
//
// The meson test sets CHORUS_TIMEOUT=6 and CHORUS_FUSION_STALL_S=1 (the
// configuration is the process's).
#include <catch2/catch.hpp>

#include <chorus/chorus.hpp>

#include <sched.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "include/chorus.h"
#include "tests/api/api_harness.hpp"
#include "tests/fusion/fusion_plan.hpp"

using chorus::test::all_zero;
using chorus::test::run;
using chorus::test::transports;
using namespace chorus::test::fusion;

TEST_CASE("fused allreduce: 200 named tensors in a different order on every rank", "[fusion]") {
  const auto plan = model_tensors();
  const int steps = 50;
  for (const char* transport : transports())
    for (int n : {2, 3, 4}) {
      if (transport && std::string(transport) == "ucx" && n > 2) continue;  // time
      DYNAMIC_SECTION((transport ? transport : "default") << ", " << n << " ranks") {
        std::vector<chorus_fusion_stats_t> after_first(n), after_last(n);
        std::vector<std::string> notes(n);  // what went wrong, per rank (no Catch2 in threads)
        auto results = run(
            n,
            [&](int rank, chorus_comm_t comm) -> int {
              std::vector<std::vector<uint8_t>> send(plan.size()), recv(plan.size());
              for (std::size_t t = 0; t < plan.size(); ++t) {
                send[t].resize(plan[t].count * elem_size(plan[t].dtype));
                recv[t].resize(send[t].size());
              }
              std::vector<std::size_t> order(plan.size());
              for (std::size_t t = 0; t < order.size(); ++t) order[t] = t;
              std::mt19937 rng(1234u + unsigned(rank));
              for (int step = 0; step < steps; ++step) {
                std::shuffle(order.begin(), order.end(), rng);
                std::vector<chorus_request_t> requests(plan.size(), nullptr);
                for (std::size_t t : order) {
                  const auto& p = plan[t];
                  void* in = send[t].data();
                  void* out = p.in_place ? in : recv[t].data();
                  for (std::size_t i = 0; i < p.count; ++i)
                    store(in, p.dtype, i, value(rank, t, i, step));
                  if (chorus_fused_allreduce(comm, p.name.c_str(), in, out, p.count, p.dtype, p.op,
                                             &requests[t]) != CHORUS_SUCCESS)
                    return 1;
                }
                for (std::size_t t = 0; t < plan.size(); ++t)
                  if (chorus_wait(&requests[t], 0) != CHORUS_SUCCESS) {
                    notes[rank] = "step " + std::to_string(step) + " " + plan[t].name + ": " +
                                  chorus_comm_last_error(comm);
                    return 2;
                  }
                for (std::size_t t = 0; t < plan.size(); ++t) {
                  const auto& p = plan[t];
                  const void* out = p.in_place ? send[t].data() : recv[t].data();
                  for (std::size_t i = 0; i < p.count; ++i)
                    if (load(out, p.dtype, i) != expected(p, t, i, step, n)) {
                      notes[rank] = "step " + std::to_string(step) + " " + p.name + "[" +
                                    std::to_string(i) +
                                    "] = " + std::to_string(load(out, p.dtype, i)) + ", expected " +
                                    std::to_string(expected(p, t, i, step, n));
                      return 3;
                    }
                }
                if (step == 0) after_first[rank] = stats_of(comm);
              }
              after_last[rank] = stats_of(comm);
              // No rank shuts its engine down (a full round everywhere)
              // before every rank has read its counters.
              return chorus_barrier(comm, 0) == CHORUS_SUCCESS ? 0 : 4;
            },
            transport);
        for (int r = 0; r < n; ++r) INFO("rank " << r << ": " << notes[r]);
        for (int r = 0; r < n; ++r) CHECK(notes[r] == "");
        REQUIRE(all_zero(results));
        for (int r = 0; r < n; ++r) {
          INFO("rank " << r);
          // After the first step every name is known: only the fast path.
          CHECK(after_last[r].slow_cycles == after_first[r].slow_cycles);
          CHECK(after_last[r].fast_cycles >= std::uint64_t(steps - 1));
          CHECK(after_last[r].tensors == plan.size() * steps);
          // Fused: fewer collectives than tensors (the plan has 29 (dtype,
          // op) groups, each a collective of its own per cycle). On idle
          // cores about a quarter; with the cores loaded a rank's tensors
          // reach more cycles (seen: 0.51 at load 7), so the bound is 3/4:
          // one collective per tensor is what it rules out.
          CHECK(after_last[r].allreduces < after_last[r].tensors * 3 / 4);
        }
      }
    }
}

TEST_CASE("fused allreduce: tensors back to back in one buffer are reduced where they lie",
          "[fusion]") {
  // Rank 0 submits in memory order, rank 1 in reverse: a bucket's tensors
  // are adjacent in memory on one rank and not on the other, which copies;
  // the collective is the same. In place and out of place.
  const int n = 2, tensors = 64, steps = 5;
  std::vector<std::size_t> count(tensors), offset(tensors);
  std::size_t total = 0;
  for (int t = 0; t < tensors; ++t) {
    count[t] = 1 + std::size_t(t) * 37 % 500;
    offset[t] = total;
    total += count[t];
  }
  for (bool in_place : {true, false}) {
    std::vector<std::string> notes(n);
    std::vector<chorus_fusion_stats_t> stats(n);
    auto results = run(n, [&](int rank, chorus_comm_t comm) -> int {
      std::vector<float> in(total), out(total, -1.0f);
      float* result = in_place ? in.data() : out.data();
      for (int step = 0; step < steps; ++step) {
        for (std::size_t i = 0; i < total; ++i) in[i] = float((i + std::size_t(step)) % 97 + rank);
        std::vector<chorus_request_t> requests(tensors, nullptr);
        for (int k = 0; k < tensors; ++k) {
          const int t = rank == 0 ? k : tensors - 1 - k;
          const std::string name = "p" + std::to_string(t);
          if (chorus_fused_allreduce(comm, name.c_str(), in.data() + offset[t], result + offset[t],
                                     count[t], CHORUS_FLOAT32, CHORUS_SUM, &requests[t]))
            return 1;
        }
        for (auto& r : requests)
          if (chorus_wait(&r, 0)) return 2;
        for (std::size_t i = 0; i < total; ++i)
          if (result[i] != float(2 * ((i + std::size_t(step)) % 97) + 1)) {
            notes[rank] = "step " + std::to_string(step) + " element " + std::to_string(i) + " = " +
                          std::to_string(result[i]);
            return 3;
          }
      }
      stats[rank] = stats_of(comm);
      return chorus_barrier(comm, 0) == CHORUS_SUCCESS ? 0 : 4;
    });
    INFO("in place " << in_place << ": " << notes[0] << " / " << notes[1]);
    CHECK(all_zero(results));
    CHECK(stats[0].tensors == std::uint64_t(tensors * steps));
  }
}

namespace {

// Per rank and step after the first: rounds on the fast path, rounds on the
// full one, and allreduces. Only a step reduced in one round says how many
// buckets a step makes: an idle round of the engine (10 ms between steps, as
// on a slow or sanitised build) may take a step in two.
struct StepCount {
  uint64_t fast = 0, slow = 0, allreduces = 0;
};

// 2 ranks reduce `count`'s float32 tensors in place, in one arena per rank,
// for `steps` steps; tensor t lies gap(rank, t) floats after the one before.
// Checks every element; returns each rank's StepCounts ("" notes: no error).
std::vector<std::vector<StepCount>> large_tensor_steps(
    const std::vector<std::size_t>& count, const std::function<std::size_t(int, std::size_t)>& gap,
    uint64_t alone_bytes, const char* transport, std::vector<std::string>& notes) {
  const int n = 2, steps = 6;
  notes.assign(n, "");
  std::vector<std::vector<StepCount>> counts(n);
  auto results = run(
      n,
      [&](int rank, chorus_comm_t comm) -> int {
        chorus_fusion_options_t options = CHORUS_FUSION_OPTIONS_INITIALIZER;
        options.alone_bytes = alone_bytes;
        // Step 0 (no names known yet) waits for the cycle; later steps are
        // due at once when complete, so no timed cycle splits one.
        options.cycle_ms = 200;
        if (chorus_fusion_configure(comm, &options)) return 1;
        // Where element i of tensor t lies on each rank.
        auto offsets = [&](int r) {
          std::vector<std::size_t> at;
          std::size_t total = 0;
          for (std::size_t t = 0; t < count.size(); ++t) {
            total += gap(r, t);
            at.push_back(total);
            total += count[t];
          }
          at.push_back(total);
          return at;
        };
        const std::vector<std::size_t> mine = offsets(rank), at0 = offsets(0), at1 = offsets(1);
        std::vector<float> data(mine.back());
        chorus_fusion_stats_t before = stats_of(comm);
        for (int step = 0; step < steps; ++step) {
          for (std::size_t t = 0; t < count.size(); ++t)
            for (std::size_t i = 0; i < count[t]; ++i)
              data[mine[t] + i] = float((mine[t] + i + step) % 89 + rank);
          std::vector<chorus_request_t> requests(count.size(), nullptr);
          for (std::size_t t = 0; t < count.size(); ++t) {
            const std::string name = "c" + std::to_string(t);
            float* p = data.data() + mine[t];
            if (chorus_fused_allreduce(comm, name.c_str(), p, p, count[t], CHORUS_FLOAT32,
                                       CHORUS_SUM, &requests[t]))
              return 2;
          }
          for (auto& r : requests)
            if (chorus_wait(&r, 0)) return 3;
          const chorus_fusion_stats_t after = stats_of(comm);
          if (step > 0)
            counts[rank].push_back({after.fast_cycles - before.fast_cycles,
                                    after.slow_cycles - before.slow_cycles,
                                    after.allreduces - before.allreduces});
          before = after;
          for (std::size_t t = 0; t < count.size(); ++t)
            for (std::size_t i = 0; i < count[t]; ++i) {
              const float want =
                  float((at0[t] + i + step) % 89) + float((at1[t] + i + step) % 89 + 1);
              if (data[mine[t] + i] != want) {
                notes[rank] = "step " + std::to_string(step) + " tensor c" + std::to_string(t) +
                              "[" + std::to_string(i) + "] = " + std::to_string(data[mine[t] + i]) +
                              ", want " + std::to_string(want);
                return 4;
              }
            }
        }
        return chorus_barrier(comm, 0) == CHORUS_SUCCESS ? 0 : 5;
      },
      transport);
  if (!all_zero(results)) notes[0] += " (a rank failed)";
  return counts;
}

// Every step reduced in one round took `allreduces`, and some step was.
void check_allreduces_per_step(const std::vector<std::vector<StepCount>>& counts,
                               uint64_t allreduces) {
  for (std::size_t r = 0; r < counts.size(); ++r) {
    int one_round = 0;
    for (std::size_t s = 0; s < counts[r].size(); ++s) {
      const StepCount& c = counts[r][s];
      INFO("rank " << r << " step " << s + 1 << ": " << c.fast << " fast and " << c.slow
                   << " full rounds, " << c.allreduces << " allreduces");
      CHECK(c.slow == 0);  // every name is known after the first step
      if (c.fast != 1) continue;
      ++one_round;
      CHECK(c.allreduces == allreduces);
    }
    INFO("rank " << r);
    CHECK(one_round > 0);
  }
}

// Tensors of 64 KiB and more among small ones.
const std::vector<std::size_t> kLargeAndSmall = {100, 20000, 50, 30000, 16384, 7, 40000};

}  // namespace

TEST_CASE("fused allreduce: large tensors back to back on every rank share one allreduce",
          "[fusion]") {
  // Tensors of the alone size (64 KiB here) or more go alone, unless every
  // rank has them right after the tensor before (known order): then a
  // bucket runs over them where they lie. With a gap before c3 on one rank
  // only, the run breaks there on every rank: two allreduces a step, not
  // the seven of one per large tensor and one per small run.
  for (bool gap : {false, true}) {
    std::vector<std::string> notes;
    const auto counts = large_tensor_steps(
        kLargeAndSmall,
        [&](int rank, std::size_t t) -> std::size_t { return gap && rank == 1 && t == 3 ? 16 : 0; },
        64 << 10, nullptr, notes);
    INFO("gap " << gap << ": " << notes[0] << " / " << notes[1]);
    REQUIRE(notes[0] + notes[1] == "");
    check_allreduces_per_step(counts, gap ? 2 : 1);
  }
}

TEST_CASE("fused allreduce: by default tensors of any size fuse where the allreduce reads parts",
          "[fusion]") {
  // The same tensors, 16 floats apart on every rank (no runs), with
  // CHORUS_FUSION_ALONE unset (auto). Over shared memory a bucket's
  // allreduce reads and writes them where they lie, so all seven make one
  // bucket; over TCP they are packed, and each of 64 KiB or more (four)
  // goes alone, between the three small ones: seven allreduces.
  for (const char* transport : {static_cast<const char*>(nullptr), "tcp"}) {
    std::vector<std::string> notes;
    const auto counts = large_tensor_steps(
        kLargeAndSmall, [](int, std::size_t t) -> std::size_t { return t ? 16 : 0; }, 0, transport,
        notes);
    INFO((transport ? transport : "default") << ": " << notes[0] << " / " << notes[1]);
    REQUIRE(notes[0] + notes[1] == "");
    check_allreduces_per_step(counts, transport ? 7 : 1);
  }
}

TEST_CASE("fused allreduce: tensors nobody waits for are reduced by the engine's own thread",
          "[fusion]") {
  // Neither chorus_test nor a wait with a timeout runs a cycle: the engine's
  // thread must. Step 0 has no known set (its cycle is due
  // CHORUS_FUSION_CYCLE_MS after the first submission); in later steps the
  // known set is complete, and the first test or wait wakes the engine's
  // thread for it (Engine::kick).
  const int tensors = 32, steps = 4;
  for (bool timed_wait : {false, true})
    for (int n : {2, 3}) {
      std::vector<std::string> notes(static_cast<std::size_t>(n));
      auto results = run(n, [&](int rank, chorus_comm_t comm) -> int {
        std::vector<std::vector<float>> data(tensors);
        for (int step = 0; step < steps; ++step) {
          std::vector<chorus_request_t> requests(tensors, nullptr);
          for (int t = 0; t < tensors; ++t) {
            data[t].assign(std::size_t(1 + t * 13), float(rank + t + step));
            const std::string name = "idle" + std::to_string(t);
            if (chorus_fused_allreduce(comm, name.c_str(), data[t].data(), data[t].data(),
                                       data[t].size(), CHORUS_FLOAT32, CHORUS_SUM, &requests[t]))
              return 1;
          }
          const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
          for (auto& r : requests) {
            if (timed_wait) {
              if (chorus_result_t rc = chorus_wait(&r, 10000); rc != CHORUS_SUCCESS) {
                notes[rank] = "step " + std::to_string(step) +
                              ": wait: " + chorus_result_string(rc) + ": " +
                              chorus_comm_last_error(comm);
                return 2;
              }
              continue;
            }
            int done = 0;
            while (!done) {
              if (chorus_test(&r, &done) != CHORUS_SUCCESS) return 2;
              if (!done && std::chrono::steady_clock::now() > give_up) {
                notes[rank] = "step " + std::to_string(step) + ": not done after 10 s";
                return 3;
              }
              if (!done) std::this_thread::sleep_for(std::chrono::microseconds(200));
            }
          }
          for (int t = 0; t < tensors; ++t) {
            // sum over ranks r of (r + t + step)
            const float want = float(n * (n - 1) / 2 + n * (t + step));
            for (float v : data[t])
              if (v != want) {
                notes[rank] = "step " + std::to_string(step) + " tensor " + std::to_string(t) +
                              " = " + std::to_string(v) + ", want " + std::to_string(want);
                return 4;
              }
          }
        }
        return chorus_barrier(comm, 0) == CHORUS_SUCCESS ? 0 : 5;
      });
      std::string all_notes;
      for (const auto& note : notes) all_notes += " / " + note;
      INFO(n << " ranks, " << (timed_wait ? "waits of 10 s" : "tests") << ":" << all_notes);
      CHECK(all_zero(results));
    }
}

namespace {

// The scheduling policy of each of this process's threads named `name`
// (/proc/self/task/*/stat, field 41).
std::vector<int> policies_of_threads_named(const std::string& name) {
  std::vector<int> policies;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm_file(task.path() / "comm");
    std::string comm;
    std::getline(comm_file, comm);
    if (comm != name) continue;
    std::ifstream stat_file(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // from field 3 on
    std::string field;
    for (int i = 3; i <= 41 && fields >> field; ++i)
      if (i == 41) policies.push_back(std::stoi(field));
  }
  return policies;
}

}  // namespace

TEST_CASE("fused allreduce: the engine's thread is a batch thread named chorus-fusion",
          "[fusion]") {
  // Woken by a step's first submission, it must not preempt the submitting
  // thread (docs/architecture.md, "Tensor fusion", *Who*).
  std::vector<std::vector<int>> seen(2);
  auto results = run(2, [&](int rank, chorus_comm_t comm) -> int {
    float x = float(rank);
    chorus_request_t request = nullptr;
    if (chorus_fused_allreduce(comm, "x", &x, &x, 1, CHORUS_FLOAT32, CHORUS_SUM, &request) ||
        chorus_wait(&request, 0) || x != 1.0f)
      return 1;
    if (chorus_barrier(comm, 0)) return 2;  // both engines are up
    seen[rank] = policies_of_threads_named("chorus-fusion");
    return chorus_barrier(comm, 0) ? 3 : 0;
  });
  CHECK(all_zero(results));
  for (const auto& policies : seen) {
    CHECK(policies.size() >= 2);  // the ranks are threads of this process
    for (int policy : policies) CHECK(policy == SCHED_BATCH);
  }
}

TEST_CASE("fused allreduce: names used once are forgotten, steady names stay known", "[fusion]") {
  // Every step brings 1000 names never seen before (past the engine's table
  // of 4096 names, which then drops the idle ones) beside 20 steady names,
  // which stay known: results exact, and the steady steps keep the fast path.
  const int n = 2, steps = 6, fresh = 1000, steady = 20;
  std::vector<std::string> notes(n);
  std::vector<chorus_fusion_stats_t> stats(n);
  auto results = run(n, [&](int rank, chorus_comm_t comm) -> int {
    std::vector<float> fresh_values(fresh), steady_values(steady);
    for (int step = 0; step < steps; ++step) {
      std::vector<chorus_request_t> requests;
      for (int t = 0; t < fresh; ++t) {
        fresh_values[t] = float(rank + t % 7 + step);
        const std::string name = "step" + std::to_string(step) + ".t" + std::to_string(t);
        requests.push_back(nullptr);
        if (chorus_fused_allreduce(comm, name.c_str(), &fresh_values[t], &fresh_values[t], 1,
                                   CHORUS_FLOAT32, CHORUS_SUM, &requests.back()))
          return 1;
      }
      for (int t = 0; t < steady; ++t) {
        steady_values[t] = float(rank * 3 + t);
        requests.push_back(nullptr);
        if (chorus_fused_allreduce(comm, ("steady" + std::to_string(t)).c_str(), &steady_values[t],
                                   &steady_values[t], 1, CHORUS_FLOAT32, CHORUS_MAX,
                                   &requests.back()))
          return 2;
      }
      for (auto& r : requests)
        if (chorus_wait(&r, 0)) return 3;
      for (int t = 0; t < fresh; ++t)
        if (fresh_values[t] != float(1 + 2 * (t % 7 + step))) {
          notes[rank] = "step " + std::to_string(step) + " fresh " + std::to_string(t) + " = " +
                        std::to_string(fresh_values[t]);
          return 4;
        }
      for (int t = 0; t < steady; ++t)
        if (steady_values[t] != float(3 * (n - 1) + t)) return 5;
    }
    // The steady names alone, now known everywhere: the fast path only.
    const auto before = stats_of(comm);
    for (int step = 0; step < 3; ++step) {
      std::vector<chorus_request_t> requests(steady, nullptr);
      for (int t = 0; t < steady; ++t)
        if (chorus_fused_allreduce(comm, ("steady" + std::to_string(t)).c_str(), &steady_values[t],
                                   &steady_values[t], 1, CHORUS_FLOAT32, CHORUS_MAX, &requests[t]))
          return 6;
      for (auto& r : requests)
        if (chorus_wait(&r, 0)) return 7;
    }
    stats[rank] = stats_of(comm);
    stats[rank].slow_cycles -= before.slow_cycles;
    return chorus_barrier(comm, 0) == CHORUS_SUCCESS ? 0 : 8;
  });
  INFO(notes[0] << " / " << notes[1]);
  CHECK(all_zero(results));
  CHECK(stats[0].tensors == std::uint64_t(steps * (fresh + steady) + 3 * steady));
  CHECK(stats[0].slow_cycles == 0);
}

TEST_CASE(
    "fused allreduce: an engine with nothing pending joins rounds every 10 ms, not every cycle",
    "[fusion]") {
  // Between steps (the ranks compute, or make other calls) the engines must
  // not wake every CHORUS_FUSION_CYCLE_MS (1 ms) for a round: at most one
  // round per 10 ms, so at most 31 in 300 ms however loaded the machine is
  // (load only spaces rounds further). The engine before this rule ran
  // about 300 there. A step after the pause still reduces exactly.
  const int n = 2;
  std::vector<std::uint64_t> idle_rounds(n);
  auto results = run(n, [&](int rank, chorus_comm_t comm) -> int {
    float value = float(rank + 1);
    chorus_request_t request = nullptr;
    if (chorus_fused_allreduce(comm, "w", &value, &value, 1, CHORUS_FLOAT32, CHORUS_SUM,
                               &request) ||
        chorus_wait(&request, 0) || value != 3.0f)
      return 1;
    const auto before = stats_of(comm).cycles;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    idle_rounds[rank] = stats_of(comm).cycles - before;
    value = float(10 * (rank + 1));
    if (chorus_fused_allreduce(comm, "w", &value, &value, 1, CHORUS_FLOAT32, CHORUS_SUM,
                               &request) ||
        chorus_wait(&request, 0) || value != 30.0f)
      return 2;
    return chorus_barrier(comm, 0) == CHORUS_SUCCESS ? 0 : 3;
  });
  CHECK(all_zero(results));
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(idle_rounds[r] <= 31);
  }
}

TEST_CASE("fused allreduce: the C++ form", "[fusion]") {
  const int n = 2;
  chorus::TcpStoreServer server(chorus::test::kToken);
  std::vector<int> ok(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto comm = chorus::Communicator::create(r, n, server.address(), chorus::test::kToken);
      std::vector<float> a(100, float(r + 1));
      std::vector<double> b(3, 2.0 * (r + 1));
      chorus::Work wa = comm.fused_allreduce("a", std::span<float>(a), chorus::Op::sum);
      chorus::Work wb = comm.fused_allreduce("b", std::span<double>(b), chorus::Op::max);
      wb.wait();
      wa.wait();
      ok[r] = a[99] == 3.0f && b[0] == 4.0;
    });
  for (auto& t : threads) t.join();
  CHECK(ok == std::vector<int>(n, 1));
}

// Run by tests/fusion/timeline_test.py with CHORUS_TIMELINE set: a short run
// whose trace the script checks.
TEST_CASE("fused allreduce: a short run for the timeline", "[.timeline]") {
  const auto plan = model_tensors(40);
  auto results = run(2, [&](int rank, chorus_comm_t comm) -> int {
    std::vector<std::vector<uint8_t>> data(plan.size());
    for (int step = 0; step < 3; ++step) {
      std::vector<chorus_request_t> requests(plan.size(), nullptr);
      for (std::size_t t = 0; t < plan.size(); ++t) {
        const std::size_t k = rank == 0 ? t : plan.size() - 1 - t;
        data[k].assign(plan[k].count * elem_size(plan[k].dtype), 1);
        if (chorus_fused_allreduce(comm, plan[k].name.c_str(), data[k].data(), data[k].data(),
                                   plan[k].count, plan[k].dtype, plan[k].op, &requests[k]))
          return 1;
      }
      for (auto& r : requests)
        if (chorus_wait(&r, 0)) return 2;
    }
    return 0;
  });
  CHECK(all_zero(results));
}
