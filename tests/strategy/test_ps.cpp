// The parameter-server strategy through the C API on thread ranks
// (tests/api/api_harness.hpp): sharding; sync mode against the
// single-process reference with 1 and 2 servers; async with one worker (the
// reference too) and with two; bounded staleness checked from a log of
// steps; a worker that leaves mid-training (the others go on, the chief is
// told); a server that leaves (the workers fail naming it); checkpoints.
// Killed processes: tests/strategy/ps_job.c under chorusrun.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "include/chorus.h"
#include "lib/strategy/ps/sharding.hpp"
#include "tests/api/api_harness.hpp"
#include "tests/strategy/mlp.hpp"
#include "tests/strategy/reference_training.hpp"

using chorus::strategy::ps::assign_shards;
using chorus::test::all_zero;
using chorus::test::flatten;
using chorus::test::kBatch;
using chorus::test::loss_and_gradients;
using chorus::test::Mlp;
using chorus::test::mlp_names;
using chorus::test::reference_run;
using chorus::test::run;

namespace {

constexpr int kPsSteps = 5;
using Clock = std::chrono::steady_clock;

chorus_optimizer_options_t momentum() {
  chorus_optimizer_options_t o = CHORUS_OPTIMIZER_OPTIONS_INITIALIZER;
  o.kind = CHORUS_OPTIMIZER_MOMENTUM;
  o.learning_rate = 0.05;
  o.momentum = 0.9;
  return o;
}

// One rank's part: create, register the MLP (rank 0's initial values, each
// rank's own data otherwise), start; servers serve. Returns the handle of a
// worker (null for a server, or on failure with *error set).
struct Rank {
  chorus_ps_t ps = nullptr;
  chorus_ps_role_t role = CHORUS_PS_WORKER;
  int index = -1;
  Mlp<float> vars, grads;
  std::string error;
};

bool set_up(Rank& me, int rank, chorus_comm_t comm, const chorus_ps_options_t& options) {
  auto fail = [&](const char* what) {
    me.error = std::string(what) + ": " + chorus_comm_last_error(comm);
    return false;
  };
  if (chorus_ps_create(comm, &options, &me.ps)) return fail("create");
  if (chorus_ps_role(me.ps, &me.role, &me.index)) return fail("role");
  me.vars = Mlp<float>::initial(rank);
  me.grads = Mlp<float>::zeros();
  const bool server = me.role == CHORUS_PS_SERVER;
  for (std::size_t v = 0; v < me.vars.vars.size(); ++v)
    if (chorus_ps_add_variable(
            me.ps, mlp_names()[v].c_str(), server ? nullptr : me.vars.vars[v].data(),
            server ? nullptr : me.grads.vars[v].data(), me.vars.vars[v].size(), CHORUS_FLOAT32))
      return fail("add_variable");
  if (chorus_ps_start(me.ps, 0)) return fail("start");
  return true;
}

// A server's part: serve until every worker is done or gone, then destroy.
int serve(Rank& me, chorus_comm_t comm, const chorus_optimizer_options_t& optimizer,
          std::string& error) {
  if (chorus_ps_serve(me.ps, &optimizer)) return error = chorus_comm_last_error(comm), 2;
  return chorus_ps_destroy(me.ps) ? 3 : 0;
}

// A worker's training loop over `steps` steps on its slice of each batch;
// after(step) runs after each pull. Returns false with me.error set.
template <typename After>
bool train(Rank& me, chorus_comm_t comm, int workers, int steps, After&& after) {
  const std::size_t slice = kBatch / std::size_t(workers);
  for (int step = 0; step < steps; ++step) {
    if (chorus_ps_pull(me.ps, 0))
      return me.error = std::string("pull: ") + chorus_comm_last_error(comm), false;
    after(step);
    loss_and_gradients(me.vars, step, slice * std::size_t(me.index + (me.role == CHORUS_PS_WORKER)),
                       slice * std::size_t(me.index + (me.role == CHORUS_PS_WORKER) + 1), me.grads);
    if (chorus_ps_push(me.ps, 0))
      return me.error = std::string("push: ") + chorus_comm_last_error(comm), false;
  }
  return true;
}

}  // namespace

TEST_CASE("ps: variables are placed whole, largest first, on the least loaded server", "[ps]") {
  CHECK(assign_shards({100, 10, 60, 50}, 2) == std::vector<int>{0, 0, 1, 1});
  CHECK(assign_shards({1, 1, 1, 1}, 3) == std::vector<int>{0, 1, 2, 0});
  CHECK(assign_shards({5, 7}, 1) == std::vector<int>{0, 0});
  CHECK(assign_shards({}, 2).empty());
  CHECK(assign_shards({8}, 3) == std::vector<int>{0});  // servers 1 and 2 hold nothing
  // Balanced within the largest variable of the best split.
  std::vector<std::size_t> sizes{32 * 4, 8 * 4, 8 * 4, 4};
  auto shard = assign_shards(sizes, 2);
  std::size_t load[2] = {0, 0};
  for (std::size_t v = 0; v < sizes.size(); ++v) load[shard[v]] += sizes[v];
  CHECK(load[0] == 128);
  CHECK(load[1] == 68);
}

TEST_CASE("ps: sync mode trains as one process on the whole batch", "[ps]") {
  const auto optimizer = momentum();
  std::vector<std::vector<double>> reference;
  std::vector<double> losses, initial;
  reference_run(optimizer, kPsSteps, reference, losses, initial);
  for (int servers : {1, 2}) {
    DYNAMIC_SECTION(servers << " server(s), 2 workers") {
      const int n = servers + 2;
      std::vector<std::vector<std::vector<float>>> pulled(2);
      std::vector<std::string> errors(n);
      auto results = run(n, [&](int rank, chorus_comm_t comm) -> int {
        chorus_ps_options_t options = CHORUS_PS_OPTIONS_INITIALIZER;
        options.servers = servers;
        options.mode = CHORUS_PS_SYNC;
        Rank me;
        if (!set_up(me, rank, comm, options)) return errors[rank] = me.error, 1;
        if (me.role == CHORUS_PS_SERVER) return serve(me, comm, optimizer, errors[rank]);
        if (!train(me, comm, 2, kPsSteps, [&](int step) {
              if (step > 0) pulled[rank].push_back(flatten(me.vars));
            }))
          return errors[rank] = me.error, 4;
        if (chorus_ps_pull(me.ps, 0)) return errors[rank] = chorus_comm_last_error(comm), 5;
        pulled[rank].push_back(flatten(me.vars));
        if (chorus_ps_finish(me.ps, 0)) return errors[rank] = chorus_comm_last_error(comm), 6;
        return chorus_ps_destroy(me.ps) ? 7 : 0;
      });
      for (int r = 0; r < n; ++r) INFO("rank " << r << ": " << errors[r]);
      REQUIRE(all_zero(results));
      for (int w = 0; w < 2; ++w) {
        REQUIRE(pulled[w].size() == std::size_t(kPsSteps));
        for (int s = 0; s < kPsSteps; ++s)
          for (std::size_t i = 0; i < pulled[w][s].size(); ++i) {
            INFO("worker " << w << ", after step " << s << ", element " << i);
            REQUIRE(double(pulled[w][s][i]) == Approx(reference[s][i]).epsilon(1e-4).margin(1e-5));
          }
      }
      double moved = 0;
      for (std::size_t i = 0; i < initial.size(); ++i)
        moved = std::max(moved, std::abs(reference.back()[i] - initial[i]));
      CHECK(moved > 0.02);
    }
  }
}

TEST_CASE("ps: async mode with one worker is sequential training; with two every push counts",
          "[ps]") {
  const auto optimizer = momentum();
  std::vector<std::vector<double>> reference;
  std::vector<double> losses, initial;
  reference_run(optimizer, kPsSteps, reference, losses, initial);
  for (int servers : {1, 2})
    for (int workers : {1, 2}) {
      DYNAMIC_SECTION(servers << " server(s), " << workers << " worker(s)") {
        const int n = workers + servers;
        std::vector<std::vector<float>> last(workers);
        std::vector<std::string> errors(n);
        std::atomic<int> trained{0};
        auto results = run(n, [&](int rank, chorus_comm_t comm) -> int {
          chorus_ps_options_t options = CHORUS_PS_OPTIONS_INITIALIZER;
          options.servers = servers;
          Rank me;
          if (!set_up(me, rank, comm, options)) return errors[rank] = me.error, 1;
          if (me.role == CHORUS_PS_SERVER) return serve(me, comm, optimizer, errors[rank]);
          // With one worker, it trains on the whole batch.
          if (!train(me, comm, workers, kPsSteps, [](int) {})) return errors[rank] = me.error, 4;
          // Every worker's pushes are in once all have trained (the servers
          // take no part: they serve).
          chorus::test::all_arrive(trained, workers);
          if (chorus_ps_pull(me.ps, 0)) return errors[rank] = chorus_comm_last_error(comm), 6;
          last[rank] = flatten(me.vars);
          if (chorus_ps_finish(me.ps, 0)) return errors[rank] = chorus_comm_last_error(comm), 7;
          if (chorus_ps_pull(me.ps, 0) != CHORUS_ERR_INVALID_USAGE)
            return errors[rank] = "pull after finish", 8;
          return chorus_ps_destroy(me.ps) ? 9 : 0;
        });
        for (int r = 0; r < n; ++r) INFO("rank " << r << ": " << errors[r]);
        REQUIRE(all_zero(results));
        if (workers == 1) {
          for (std::size_t i = 0; i < last[0].size(); ++i) {
            INFO("element " << i);
            REQUIRE(double(last[0][i]) == Approx(reference.back()[i]).epsilon(1e-4).margin(1e-5));
          }
        } else {
          // Both workers see the same values, moved by the 2 x kPsSteps updates.
          CHECK(last[0] == last[1]);
          CHECK(last[0] != flatten(Mlp<float>::initial(0)));
          for (float x : last[0]) CHECK(std::isfinite(x));
        }
      }
    }
}

TEST_CASE("ps: bounded staleness keeps every worker within max_staleness steps", "[ps]") {
  const auto optimizer = momentum();
  struct Event {
    Clock::time_point at;
    int worker;
    bool pull;  // a pull that returned for `step`, else a push about to be sent for `step`
    int step;
  };
  std::mutex log_mu;
  std::vector<Event> log;
  const int workers = 3, steps = 8;
  std::vector<std::string> errors(workers + 1);
  auto results = run(workers + 1, [&](int rank, chorus_comm_t comm) -> int {
    chorus_ps_options_t options = CHORUS_PS_OPTIONS_INITIALIZER;
    options.mode = CHORUS_PS_BOUNDED;
    options.max_staleness = 1;
    Rank me;
    if (!set_up(me, rank, comm, options)) return errors[rank] = me.error, 1;
    if (me.role == CHORUS_PS_SERVER) return serve(me, comm, optimizer, errors[rank]);
    for (int step = 0; step < steps; ++step) {
      if (chorus_ps_pull(me.ps, 0)) return errors[rank] = chorus_comm_last_error(comm), 4;
      {
        std::lock_guard lock(log_mu);
        log.push_back({Clock::now(), rank, true, step});
      }
      // Worker 2 is slow; the others would race ahead without the bound.
      std::this_thread::sleep_for(std::chrono::milliseconds(rank == 2 ? 30 : 1));
      loss_and_gradients(me.vars, step, 0, kBatch, me.grads);
      {
        std::lock_guard lock(log_mu);
        log.push_back({Clock::now(), rank, false, step});
      }
      if (chorus_ps_push(me.ps, 0)) return errors[rank] = chorus_comm_last_error(comm), 5;
    }
    if (chorus_ps_finish(me.ps, 0)) return errors[rank] = chorus_comm_last_error(comm), 6;
    return chorus_ps_destroy(me.ps) ? 7 : 0;
  });
  for (std::size_t r = 0; r < errors.size(); ++r) INFO("rank " << r << ": " << errors[r]);
  REQUIRE(all_zero(results));
  // When worker w's pull for step s returned, every other worker had begun
  // sending at least s - 1 pushes. A push is logged before it is sent, and
  // the server grants a pull only after the pushes it waits for arrived, so
  // a correct server never shows fewer pushes here than the bound allows.
  int closest = steps;
  for (const Event& e : log) {
    if (!e.pull) continue;
    for (int v = 0; v < workers; ++v) {
      if (v == e.worker) continue;
      int pushes = 0;
      for (const Event& p : log)
        if (!p.pull && p.worker == v && p.at < e.at) ++pushes;
      INFO("worker " << e.worker << " started step " << e.step << " when worker " << v
                     << " had pushed " << pushes);
      CHECK(pushes >= e.step - 1);
      closest = std::min(closest, pushes - (e.step - 1));
    }
  }
  // The bound was reached (the fast workers did wait), so the check could fail.
  CHECK(closest == 0);
}

TEST_CASE("ps: a worker that leaves mid-training is counted out; the chief is told", "[ps]") {
  const auto optimizer = momentum();
  for (int mode : {CHORUS_PS_ASYNC, CHORUS_PS_SYNC}) {
    DYNAMIC_SECTION((mode == CHORUS_PS_ASYNC ? "async" : "sync")) {
      std::vector<std::string> errors(4);
      std::vector<int> told(4, -1);
      auto results = run(4, [&](int rank, chorus_comm_t comm) -> int {
        chorus_ps_options_t options = CHORUS_PS_OPTIONS_INITIALIZER;
        options.mode = static_cast<chorus_ps_mode_t>(mode);
        Rank me;
        if (!set_up(me, rank, comm, options)) return errors[rank] = me.error, 1;
        if (me.role == CHORUS_PS_SERVER) return serve(me, comm, optimizer, errors[rank]);
        // Rank 2 trains 2 steps and goes away without finishing.
        const int steps = rank == 2 ? 2 : 12;
        if (!train(me, comm, 3, steps, [&](int) {
              if (rank != 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }))
          return errors[rank] = me.error, 4;
        if (rank == 2) return chorus_ps_destroy(me.ps) ? 5 : 0;
        int failed[4], count = 0;
        if (chorus_ps_failed_workers(me.ps, failed, 4, &count)) return 6;
        if (count == 1) told[rank] = failed[0];
        if (chorus_ps_finish(me.ps, 0)) return errors[rank] = chorus_comm_last_error(comm), 7;
        return chorus_ps_destroy(me.ps) ? 8 : 0;
      });
      for (int r = 0; r < 4; ++r) INFO("rank " << r << ": " << errors[r]);
      REQUIRE(all_zero(results));
      CHECK(told[0] == 2);
      CHECK(told[1] == 2);
    }
  }
}

TEST_CASE("ps: a server that leaves fails the workers naming it", "[ps]") {
  const auto optimizer = momentum();
  std::vector<std::string> errors(4);
  std::vector<double> took(4, 0);
  auto results = run(4, [&](int rank, chorus_comm_t comm) -> int {
    chorus_ps_options_t options = CHORUS_PS_OPTIONS_INITIALIZER;
    options.servers = 2;
    Rank me;
    if (!set_up(me, rank, comm, options)) return errors[rank] = me.error, 1;
    if (me.role == CHORUS_PS_SERVER) {
      if (me.index == 1) {  // server 1 (rank 3) leaves at once
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return chorus_ps_destroy(me.ps) ? 3 : 0;
      }
      chorus_ps_serve(me.ps, &optimizer);  // until both workers are gone
      return chorus_ps_destroy(me.ps) ? 3 : 0;
    }
    const auto start = Clock::now();
    for (int step = 0; step < 1000; ++step) {
      if (chorus_ps_pull(me.ps, 0) || chorus_ps_push(me.ps, 0)) {
        took[rank] = std::chrono::duration<double>(Clock::now() - start).count();
        errors[rank] = chorus_comm_last_error(comm);
        chorus_ps_destroy(me.ps);
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return 9;  // never noticed
  });
  REQUIRE(all_zero(results));
  for (int w = 0; w < 2; ++w) {
    INFO("worker rank " << w);
    CHECK_THAT(errors[w], Catch::Contains("parameter server 1 (rank 3) failed"));
    CHECK(took[w] < 10);
  }
}

TEST_CASE("ps: the chief saves a checkpoint; a new job restores it", "[ps]") {
  const auto optimizer = momentum();
  const std::string path = "ps-checkpoint-" + std::to_string(::getpid()) + ".bin";
  std::vector<float> saved, restored;
  std::vector<std::string> errors(3);
  std::atomic<int> arrived[2][2] = {{0, 0}, {0, 0}};
  auto job = [&](bool restore) {
    return run(3, [&](int rank, chorus_comm_t comm) -> int {
      chorus_ps_options_t options = CHORUS_PS_OPTIONS_INITIALIZER;
      options.mode = CHORUS_PS_SYNC;
      Rank me;
      if (!set_up(me, rank + (restore ? 7 : 0), comm, options)) return errors[rank] = me.error, 1;
      if (me.role == CHORUS_PS_SERVER) return serve(me, comm, optimizer, errors[rank]);
      if (restore) {
        if (rank == 0 && chorus_ps_restore(me.ps, path.c_str(), 0))
          return errors[rank] = chorus_comm_last_error(comm), 4;
      } else if (!train(me, comm, 2, 3, [](int) {})) {
        return errors[rank] = me.error, 5;
      }
      // The workers (the server serves) see the servers' values once the
      // chief has saved or restored them.
      chorus::test::all_arrive(arrived[restore][0], 2);
      if (rank == 0 && !restore && chorus_ps_save(me.ps, path.c_str(), 0))
        return errors[rank] = chorus_comm_last_error(comm), 7;
      chorus::test::all_arrive(arrived[restore][1], 2);
      if (chorus_ps_pull(me.ps, 0)) return errors[rank] = chorus_comm_last_error(comm), 9;
      if (rank == 1) (restore ? restored : saved) = flatten(me.vars);
      if (chorus_ps_finish(me.ps, 0)) return 10;
      return chorus_ps_destroy(me.ps) ? 11 : 0;
    });
  };
  auto first = job(false);
  for (int r = 0; r < 3; ++r) INFO("rank " << r << ": " << errors[r]);
  REQUIRE(all_zero(first));
  auto second = job(true);
  for (int r = 0; r < 3; ++r) INFO("rank " << r << ": " << errors[r]);
  REQUIRE(all_zero(second));
  std::remove(path.c_str());
  REQUIRE(saved.size() == restored.size());
  CHECK(saved == restored);
  // The second job started elsewhere (other initial values): restore moved it.
  CHECK(flatten(Mlp<float>::initial(7)) != restored);
}
