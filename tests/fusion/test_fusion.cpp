// The fusion engine through the C API, on thread ranks (tests/api/
// api_harness.hpp) over shared memory, TCP and UCX: named tensors submitted
// in a different order on every rank, results against a reference computed
// here (fusion_plan.hpp); the cached negotiation; the engine's thread and
// its rounds with nothing pending; names forgotten and kept; tensors nobody
// waits for (only chorus_test); the C++ form. Where the tensors lie (back
// to back, runs, apart, the alone rule): test_fusion_layout.cpp. The verdicts (a tensor one rank
// never submits, a rank that destroys its communicator, a mismatch), the local refusals and
// compression: test_fusion_failures.cpp.
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
              // Not a stall test: on a loaded machine (a sanitizer build in
              // CI) a rank may wait longer than this binary's
              // CHORUS_FUSION_STALL_S=1 for the others, and a stall check is
              // a round that exchanges names (5 against 3 under ASan).
              chorus_fusion_options_t options = CHORUS_FUSION_OPTIONS_INITIALIZER;
              options.stall_s = 60;
              if (chorus_fusion_configure(comm, &options) != CHORUS_SUCCESS) return 5;
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
