// The mirrored strategy's refusals through the C API: each bad argument is
// CHORUS_ERR_INVALID_ARGUMENT with a message that names it; an apply out of
// turn is CHORUS_ERR_INVALID_USAGE; a refused apply changes nothing; a
// refusal on one rank fails the others; a strategy outliving its
// communicator is refused, and still freed.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "include/chorus.h"
#include "tests/api/api_harness.hpp"

using chorus::test::all_zero;
using chorus::test::run;

namespace {

// The result and last error of one call.
struct Outcome {
  int rc = -1;
  std::string message;
};

// Records every outcome by label, on one thread rank (no Catch2 there).
struct Calls {
  chorus_comm_t comm;
  std::vector<std::pair<std::string, Outcome>> outcomes;
  void operator()(const std::string& label, chorus_result_t rc, chorus_comm_t of = nullptr,
                  bool use_null = false) {
    outcomes.push_back(
        {label, {rc, chorus_comm_last_error(use_null ? nullptr : (of ? of : comm))}});
  }
};

void expect(const Calls& calls, const std::string& label, int rc, const std::string& words) {
  for (const auto& [l, o] : calls.outcomes)
    if (l == label) {
      INFO(label << ": " << o.message);
      CHECK(o.rc == rc);
      CHECK(o.message.find(words) != std::string::npos);
      return;
    }
  FAIL("no call " << label);
}

}  // namespace

TEST_CASE("mirrored: bad arguments are refused, each named", "[mirrored]") {
  Calls calls{nullptr, {}};
  auto results = run(1, [&](int, chorus_comm_t comm) -> int {
    calls.comm = comm;
    chorus_mirrored_t m = nullptr;
    calls("create: no comm", chorus_mirrored_create(nullptr, nullptr, &m), nullptr, true);
    calls("create: no out", chorus_mirrored_create(comm, nullptr, nullptr));
    chorus_mirrored_options_t o = CHORUS_MIRRORED_OPTIONS_INITIALIZER;
    o.size = 0;
    calls("create: size", chorus_mirrored_create(comm, &o, &m));
    o = CHORUS_MIRRORED_OPTIONS_INITIALIZER;
    o.root = 5;
    calls("create: root", chorus_mirrored_create(comm, &o, &m));
    o.root = 0;
    o.check_replicas = -2;
    calls("create: check", chorus_mirrored_create(comm, &o, &m));
    // Without the fusion engine gradient_ready stays local (the refusals
    // above have failed the communicator, as every refusal does).
    o.check_replicas = -1;
    o.use_fusion = 0;
    if (chorus_mirrored_create(comm, &o, &m)) return 1;

    float w[4] = {1, 2, 3, 4}, gw[4] = {}, u[2] = {}, x[1] = {};
    calls("add: no strategy", chorus_mirrored_add_variable(nullptr, "w", w, gw, 4, CHORUS_FLOAT32),
          nullptr, true);
    calls("add: no name", chorus_mirrored_add_variable(m, nullptr, w, gw, 4, CHORUS_FLOAT32));
    calls("add: empty name", chorus_mirrored_add_variable(m, "", w, gw, 4, CHORUS_FLOAT32));
    if (chorus_mirrored_add_variable(m, "w", w, gw, 4, CHORUS_FLOAT32)) return 2;
    calls("add: twice", chorus_mirrored_add_variable(m, "w", u, nullptr, 2, CHORUS_FLOAT32));
    calls("add: no variable", chorus_mirrored_add_variable(m, "v", nullptr, gw, 4, CHORUS_FLOAT32));
    calls("add: count 0", chorus_mirrored_add_variable(m, "v", u, nullptr, 0, CHORUS_FLOAT32));
    calls("add: too large",
          chorus_mirrored_add_variable(m, "v", u, nullptr, SIZE_MAX / 2, CHORUS_FLOAT32));
    calls("add: dtype", chorus_mirrored_add_variable(m, "v", u, nullptr, 2, (chorus_dtype_t)99));
    calls("add: gradient is the variable",
          chorus_mirrored_add_variable(m, "v", x, x, 1, CHORUS_FLOAT32));
    if (chorus_mirrored_add_variable(m, "untrained", u, nullptr, 2, CHORUS_FLOAT32)) return 3;

    calls("ready: no name", chorus_mirrored_gradient_ready(m, nullptr));
    calls("ready: unknown", chorus_mirrored_gradient_ready(m, "nope"));
    calls("ready: untrained", chorus_mirrored_gradient_ready(m, "untrained"));
    if (chorus_mirrored_gradient_ready(m, "w")) return 4;
    calls("ready: twice", chorus_mirrored_gradient_ready(m, "w"));

    chorus_optimizer_options_t opt = CHORUS_OPTIMIZER_OPTIONS_INITIALIZER;
    calls("apply: no options", chorus_mirrored_apply(m, nullptr));
    opt.size = 8;
    calls("apply: size", chorus_mirrored_apply(m, &opt));
    opt = CHORUS_OPTIMIZER_OPTIONS_INITIALIZER;
    opt.kind = (chorus_optimizer_kind_t)7;
    calls("apply: kind", chorus_mirrored_apply(m, &opt));
    opt.kind = CHORUS_OPTIMIZER_ADAM;
    opt.beta2 = 1.5;
    calls("apply: beta2", chorus_mirrored_apply(m, &opt));
    opt = CHORUS_OPTIMIZER_OPTIONS_INITIALIZER;
    opt.learning_rate = -0.1;
    calls("apply: learning rate", chorus_mirrored_apply(m, &opt));
    opt.learning_rate = 0.1;
    calls("apply: not reduced", chorus_mirrored_apply(m, &opt));

    calls("broadcast: timeout", chorus_mirrored_broadcast_variables(m, -1));
    calls("reduce: timeout", chorus_mirrored_reduce_gradients(m, -5));
    calls("end_step: timeout", chorus_mirrored_end_step(m, -1));
    calls("check: timeout", chorus_mirrored_check_replicas(m, -1));
    calls("destroy: NULL", chorus_mirrored_destroy(nullptr), nullptr, true);
    // Nothing was applied.
    if (w[0] != 1 || w[3] != 4) return 5;
    return chorus_mirrored_destroy(m) ? 6 : 0;
  });
  REQUIRE(all_zero(results));
  const int bad = CHORUS_ERR_INVALID_ARGUMENT;
  expect(calls, "create: no comm", bad, "communicator handle is NULL");
  expect(calls, "create: no out", bad, "out is NULL");
  expect(calls, "create: size", bad, "options->size 0");
  expect(calls, "create: root", bad, "root 5 is not a rank of this communicator");
  expect(calls, "create: check", bad, "check_replicas -2");
  expect(calls, "add: no strategy", bad, "mirrored strategy handle is NULL");
  expect(calls, "add: no name", bad, "name is NULL");
  expect(calls, "add: empty name", bad, "the variable name is empty");
  expect(calls, "add: twice", bad, "variable 'w' is already registered");
  expect(calls, "add: no variable", bad, "variable 'v' is NULL");
  expect(calls, "add: count 0", bad, "variable 'v' has a count of 0");
  expect(calls, "add: too large", bad, "larger than memory");
  expect(calls, "add: dtype", bad, "'v': unknown dtype 99");
  expect(calls, "add: gradient is the variable", bad, "the same memory");
  expect(calls, "ready: no name", bad, "name is NULL");
  expect(calls, "ready: unknown", bad, "no variable 'nope' is registered");
  expect(calls, "ready: untrained", bad, "'untrained' was registered without a gradient");
  expect(calls, "ready: twice", bad, "gradient of 'w' was already handed over this step");
  expect(calls, "apply: no options", bad, "optimizer is NULL");
  expect(calls, "apply: size", bad, "optimizer->size 8");
  expect(calls, "apply: kind", bad, "unknown optimizer kind 7");
  expect(calls, "apply: beta2", bad, "beta2 1.5 is out of range");
  expect(calls, "apply: learning rate", bad, "learning_rate -0.1 is out of range");
  expect(calls, "apply: not reduced", CHORUS_ERR_INVALID_USAGE,
         "the gradient of 'w' has not been reduced this step");
  expect(calls, "broadcast: timeout", bad, "timeout_ms -1 is negative");
  expect(calls, "reduce: timeout", bad, "timeout_ms -5 is negative");
  expect(calls, "end_step: timeout", bad, "timeout_ms -1 is negative");
  expect(calls, "check: timeout", bad, "timeout_ms -1 is negative");
  expect(calls, "destroy: NULL", CHORUS_SUCCESS, "");
}

TEST_CASE("mirrored: apply refuses what the optimizers cannot update, changing nothing",
          "[mirrored]") {
  std::string dtype_message, kind_message;
  std::vector<float> after_refusal;
  auto results = run(1, [&](int, chorus_comm_t comm) -> int {
    chorus_mirrored_t m = nullptr;
    if (chorus_mirrored_create(comm, nullptr, &m)) return 1;
    std::vector<float> w{1, 2, 3}, gw{1, 1, 1};
    std::vector<int32_t> counts{1, 2}, gcounts{5, 5};
    if (chorus_mirrored_add_variable(m, "w", w.data(), gw.data(), 3, CHORUS_FLOAT32) ||
        chorus_mirrored_add_variable(m, "counts", counts.data(), gcounts.data(), 2, CHORUS_INT32))
      return 2;
    // Reducing an int32 gradient is fine; updating it is not.
    if (chorus_mirrored_reduce_gradients(m, 0)) return 3;
    chorus_optimizer_options_t sgd = CHORUS_OPTIMIZER_OPTIONS_INITIALIZER;
    if (chorus_mirrored_apply(m, &sgd) != CHORUS_ERR_INVALID_ARGUMENT) return 4;
    dtype_message = chorus_comm_last_error(comm);
    after_refusal = w;
    chorus_mirrored_destroy(m);
    return 0;
  });
  REQUIRE(all_zero(results));
  CHECK(dtype_message.find("variable 'counts' is int32; the optimizers update float32 and "
                           "float64 only") != std::string::npos);
  CHECK(after_refusal == std::vector<float>{1, 2, 3});

  // One optimizer kind per strategy.
  results = run(1, [&](int, chorus_comm_t comm) -> int {
    chorus_mirrored_t m = nullptr;
    if (chorus_mirrored_create(comm, nullptr, &m)) return 1;
    std::vector<double> w{1, 2}, gw{0.5, 0.5};
    if (chorus_mirrored_add_variable(m, "w", w.data(), gw.data(), 2, CHORUS_FLOAT64)) return 2;
    chorus_optimizer_options_t o = CHORUS_OPTIMIZER_OPTIONS_INITIALIZER;
    o.learning_rate = 0.5;
    if (chorus_mirrored_reduce_gradients(m, 0) || chorus_mirrored_apply(m, &o)) return 3;
    if (w[0] != 0.75 || w[1] != 1.75) return 4;  // float64 variables train too
    if (chorus_mirrored_end_step(m, 0) || chorus_mirrored_reduce_gradients(m, 0)) return 5;
    o.kind = CHORUS_OPTIMIZER_ADAM;
    if (chorus_mirrored_apply(m, &o) != CHORUS_ERR_INVALID_ARGUMENT) return 6;
    kind_message = chorus_comm_last_error(comm);
    chorus_mirrored_destroy(m);
    return 0;
  });
  REQUIRE(all_zero(results));
  CHECK(kind_message.find("the optimizer is sgd (fixed by the first apply), not adam") !=
        std::string::npos);
}

TEST_CASE("mirrored: a refusal on one rank fails the others' collective", "[mirrored]") {
  const int n = 2;
  std::vector<int> rcs(n, -1);
  std::vector<std::string> messages(n);
  auto results = run(n, [&](int rank, chorus_comm_t comm) -> int {
    chorus_mirrored_t m = nullptr;
    if (chorus_mirrored_create(comm, nullptr, &m)) return 1;
    float w[2] = {1, 2};
    if (chorus_mirrored_add_variable(m, "w", w, nullptr, 2, CHORUS_FLOAT32)) return 2;
    // Rank 1 registers a name twice; rank 0 goes on to the broadcast, in
    // which rank 1 will never take part.
    rcs[rank] = rank == 1 ? chorus_mirrored_add_variable(m, "w", w, nullptr, 2, CHORUS_FLOAT32)
                          : chorus_mirrored_broadcast_variables(m, 0);
    messages[rank] = chorus_comm_last_error(comm);
    chorus_mirrored_destroy(m);
    return 0;
  });
  REQUIRE(all_zero(results));
  // Rank 0 fails in the broadcast with rank 1's verdict, or, if the notice
  // came before it started, as a call on a failed communicator quoting it.
  CHECK(rcs[1] == CHORUS_ERR_INVALID_ARGUMENT);
  CHECK((rcs[0] == CHORUS_ERR_INVALID_ARGUMENT || rcs[0] == CHORUS_ERR_ABORTED));
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << messages[r]);
    CHECK(messages[r].find("rank 1: mirrored: add_variable: variable 'w' is already registered") !=
          std::string::npos);
  }
}

TEST_CASE("mirrored: a strategy outliving its communicator is refused, then freed", "[mirrored]") {
  chorus_mirrored_t kept = nullptr;
  auto results = run(1, [&](int, chorus_comm_t comm) -> int {
    return chorus_mirrored_create(comm, nullptr, &kept) ? 1 : 0;
  });
  REQUIRE(all_zero(results));
  CHECK(chorus_mirrored_reduce_gradients(kept, 0) == CHORUS_ERR_INVALID_USAGE);
  CHECK(chorus_mirrored_destroy(kept) == CHORUS_SUCCESS);
}
