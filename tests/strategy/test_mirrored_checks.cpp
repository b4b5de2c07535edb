// The mirrored strategy's collectives other than training, through the C
// API on thread ranks: broadcast_variables, the replica check (a replica
// perturbed on one rank fails every rank, named; every K steps at
// end_step; never by default) and the refusals of bad arguments.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "include/chorus.h"
#include "tests/api/api_harness.hpp"

using chorus::test::all_zero;
using chorus::test::run;

namespace {

// Three trained float32 variables a (10), b (100), c (1000) with gradients.
struct Abc {
  std::vector<float> a, b, c, ga, gb, gc;
  Abc() : a(10, 1.0f), b(100, 2.0f), c(1000, 3.0f), ga(10), gb(100), gc(1000) {}
  bool add(chorus_mirrored_t m) {
    return chorus_mirrored_add_variable(m, "a", a.data(), ga.data(), a.size(), CHORUS_FLOAT32) ==
               CHORUS_SUCCESS &&
           chorus_mirrored_add_variable(m, "b", b.data(), gb.data(), b.size(), CHORUS_FLOAT32) ==
               CHORUS_SUCCESS &&
           chorus_mirrored_add_variable(m, "c", c.data(), gc.data(), c.size(), CHORUS_FLOAT32) ==
               CHORUS_SUCCESS;
  }
  // Gradients that differ by rank; reduce and apply SGD.
  chorus_result_t train(chorus_mirrored_t m, int rank, int step) {
    for (auto* g : {&ga, &gb, &gc})
      for (std::size_t i = 0; i < g->size(); ++i)
        (*g)[i] = float(std::sin(double(i) + rank + 0.3 * step));
    chorus_optimizer_options_t sgd = CHORUS_OPTIMIZER_OPTIONS_INITIALIZER;
    if (auto rc = chorus_mirrored_reduce_gradients(m, 0)) return rc;
    return chorus_mirrored_apply(m, &sgd);
  }
};

// Runs body on n ranks with a strategy made with `options`; results as
// run()'s, every rank's last error in messages.
std::vector<int> with_strategy(
    int n, const chorus_mirrored_options_t& options, std::vector<std::string>& messages,
    const std::function<int(int, chorus_comm_t, chorus_mirrored_t)>& body,
    const char* transport = nullptr) {
  messages.assign(std::size_t(n), "");
  return run(
      n,
      [&](int rank, chorus_comm_t comm) -> int {
        chorus_mirrored_t m = nullptr;
        if (chorus_mirrored_create(comm, &options, &m)) return 100;
        const int result = body(rank, comm, m);
        messages[rank] = chorus_comm_last_error(comm);
        return chorus_mirrored_destroy(m) == CHORUS_SUCCESS ? result : 200;
      },
      transport);
}

}  // namespace

TEST_CASE("mirrored: broadcast_variables makes different values the root's", "[mirrored]") {
  const int n = 3, root = 2;
  std::vector<std::vector<float>> f32(n);
  std::vector<std::vector<double>> f64(n);
  std::vector<std::vector<int32_t>> i32(n);
  std::vector<std::vector<uint8_t>> u8(n);
  chorus_mirrored_options_t options = CHORUS_MIRRORED_OPTIONS_INITIALIZER;
  options.root = root;
  std::vector<std::string> messages;
  std::vector<int> check_before(n, -1);
  auto results =
      with_strategy(n, options, messages, [&](int rank, chorus_comm_t, chorus_mirrored_t m) -> int {
        f32[rank].resize(33);
        f64[rank].resize(5);
        i32[rank].resize(7);
        u8[rank].resize(300);
        std::vector<float> grad(33);
        for (std::size_t i = 0; i < 33; ++i) f32[rank][i] = float(i) * 0.5f + float(rank) * 100;
        for (std::size_t i = 0; i < 5; ++i) f64[rank][i] = 1.0 / double(i + 1 + rank);
        for (std::size_t i = 0; i < 7; ++i) i32[rank][i] = int32_t(i) - 1000 * rank;
        for (std::size_t i = 0; i < 300; ++i) u8[rank][i] = uint8_t(i * 7 + std::size_t(rank));
        if (chorus_mirrored_add_variable(m, "weights", f32[rank].data(), grad.data(), 33,
                                         CHORUS_FLOAT32) ||
            chorus_mirrored_add_variable(m, "scale", f64[rank].data(), nullptr, 5,
                                         CHORUS_FLOAT64) ||
            chorus_mirrored_add_variable(m, "counts", i32[rank].data(), nullptr, 7, CHORUS_INT32) ||
            chorus_mirrored_add_variable(m, "mask", u8[rank].data(), nullptr, 300, CHORUS_UINT8))
          return 1;
        // Before: the replicas differ, and the check says so (naming the first
        // variable and rank 1); the communicator goes on.
        check_before[rank] = chorus_mirrored_check_replicas(m, 0);
        if (chorus_mirrored_broadcast_variables(m, 0)) return 2;
        if (chorus_mirrored_check_replicas(m, 0)) return 3;
        return 0;
      });
  for (int r = 0; r < n; ++r) INFO("rank " << r << ": " << messages[r]);
  REQUIRE(all_zero(results));
  for (int r = 0; r < n; ++r) {
    CHECK(check_before[r] == CHORUS_ERR_MISMATCH);
    CHECK(f32[r] == f32[root]);
    CHECK(f64[r] == f64[root]);
    CHECK(i32[r] == i32[root]);
    CHECK(u8[r] == u8[root]);
  }
  // The root's own values, not some other rank's.
  CHECK(f32[0][1] == 200.5f);
  CHECK(i32[0][3] == -1997);
  CHECK(f64[1][0] == 1.0 / 3.0);
}

TEST_CASE("mirrored: a replica perturbed on one rank fails every rank, named", "[mirrored]") {
  const int n = 3;
  for (const char* transport : {static_cast<const char*>(nullptr), "tcp"}) {
    // b differs on rank 2 and c (registered later) on rank 1: b is named,
    // with rank 2. Then b on ranks 1 and 2: the lowest, rank 1, is named.
    for (bool both : {false, true}) {
      DYNAMIC_SECTION((transport ? transport : "shm") << (both ? ", b on ranks 1 and 2" : "")) {
        std::vector<int> verdicts(n, -1), after(n, -1);
        std::vector<std::string> verdict_messages(n), messages;
        auto results = with_strategy(
            n, CHORUS_MIRRORED_OPTIONS_INITIALIZER, messages,
            [&](int rank, chorus_comm_t comm, chorus_mirrored_t m) -> int {
              Abc v;
              if (!v.add(m) || chorus_mirrored_broadcast_variables(m, 0)) return 1;
              if (v.train(m, rank, 0) || chorus_mirrored_end_step(m, 0)) return 2;
              if (chorus_mirrored_check_replicas(m, 0)) return 3;  // identical so far
              if (rank == 2 || (both && rank == 1))
                v.b[17] = std::nextafter(v.b[17], 10.0f);  // one bit
              if (rank == 1) v.c[999] += 1;
              verdicts[rank] = chorus_mirrored_check_replicas(m, 0);
              verdict_messages[rank] = chorus_comm_last_error(comm);
              // The communicator goes on: the root's values restore the replicas.
              if (chorus_mirrored_broadcast_variables(m, 0)) return 4;
              after[rank] = chorus_mirrored_check_replicas(m, 0);
              return 0;
            },
            transport);
        for (int r = 0; r < n; ++r) INFO("rank " << r << ": " << messages[r]);
        REQUIRE(all_zero(results));
        const std::string expected = std::string("replicas diverged at step 1: variable 'b' on ") +
                                     (both ? "rank 1" : "rank 2") +
                                     " differs from rank 0 (digest 0x";
        for (int r = 0; r < n; ++r) {
          INFO("rank " << r << ": " << verdict_messages[r]);
          CHECK(verdicts[r] == CHORUS_ERR_MISMATCH);
          CHECK(verdict_messages[r].rfind(expected, 0) == 0);
          CHECK(verdict_messages[r] == verdict_messages[0]);  // one verdict, word for word
          CHECK(after[r] == CHORUS_SUCCESS);
        }
      }
    }
  }
}

TEST_CASE("mirrored: the check every K steps fires at end_step of step K", "[mirrored]") {
  const int n = 3;
  chorus_mirrored_options_t options = CHORUS_MIRRORED_OPTIONS_INITIALIZER;
  options.check_replicas = 2;
  std::vector<int> first(n, -1), second(n, -1);
  std::vector<std::string> messages;
  auto results =
      with_strategy(n, options, messages, [&](int rank, chorus_comm_t, chorus_mirrored_t m) -> int {
        Abc v;
        if (!v.add(m) || chorus_mirrored_broadcast_variables(m, 0)) return 1;
        if (v.train(m, rank, 0)) return 2;
        if (rank == 2) v.a[3] = -v.a[3];
        first[rank] = chorus_mirrored_end_step(m, 0);  // step 1: no check
        if (v.train(m, rank, 1)) return 3;
        second[rank] = chorus_mirrored_end_step(m, 0);  // step 2: checked
        return 0;
      });
  REQUIRE(all_zero(results));
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << messages[r]);
    CHECK(first[r] == CHORUS_SUCCESS);
    CHECK(second[r] == CHORUS_ERR_MISMATCH);
    CHECK(messages[r].find("replicas diverged at step 2: variable 'a' on rank 2 differs from rank "
                           "0") != std::string::npos);
  }
}

TEST_CASE("mirrored: by default (CHORUS_CHECK_REPLICAS unset) end_step never checks",
          "[mirrored]") {
  const int n = 2;
  std::vector<int> steps_ok(n, -1), explicit_check(n, -1);
  std::vector<std::string> messages;
  auto results = with_strategy(n, CHORUS_MIRRORED_OPTIONS_INITIALIZER, messages,
                               [&](int rank, chorus_comm_t, chorus_mirrored_t m) -> int {
                                 Abc v;
                                 if (!v.add(m) || chorus_mirrored_broadcast_variables(m, 0))
                                   return 1;
                                 if (rank == 1) v.c[0] = 42;
                                 steps_ok[rank] = 0;
                                 for (int step = 0; step < 4; ++step)
                                   if (v.train(m, rank, step) || chorus_mirrored_end_step(m, 0))
                                     steps_ok[rank] = 1;
                                 explicit_check[rank] = chorus_mirrored_check_replicas(m, 0);
                                 return 0;
                               });
  REQUIRE(all_zero(results));
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << messages[r]);
    CHECK(steps_ok[r] == 0);
    CHECK(explicit_check[r] == CHORUS_ERR_MISMATCH);
    CHECK(messages[r].find("at step 4: variable 'c' on rank 1") != std::string::npos);
  }
}

// Run by the strategy-check-env test with CHORUS_CHECK_REPLICAS=3.
TEST_CASE("mirrored: CHORUS_CHECK_REPLICAS sets the default interval", "[.check-env]") {
  const int n = 2;
  std::vector<std::vector<int>> verdicts(n);
  auto results = run(n, [&](int rank, chorus_comm_t comm) -> int {
    chorus_mirrored_t m = nullptr;
    if (chorus_mirrored_create(comm, nullptr, &m)) return 1;  // NULL: the defaults
    Abc v;
    if (!v.add(m) || chorus_mirrored_broadcast_variables(m, 0)) return 2;
    if (rank == 1) v.b[5] = 0;
    for (int step = 0; step < 3; ++step) {
      if (v.train(m, rank, step)) return 3;
      verdicts[rank].push_back(chorus_mirrored_end_step(m, 0));
    }
    return chorus_mirrored_destroy(m) ? 4 : 0;
  });
  REQUIRE(all_zero(results));
  for (int r = 0; r < n; ++r)
    CHECK(verdicts[r] == std::vector<int>{CHORUS_SUCCESS, CHORUS_SUCCESS, CHORUS_ERR_MISMATCH});
}

TEST_CASE("mirrored: variables registered in another order are named as such", "[mirrored]") {
  const int n = 2;
  std::vector<int> verdicts(n, -1);
  std::vector<std::string> messages;
  auto results = with_strategy(
      n, CHORUS_MIRRORED_OPTIONS_INITIALIZER, messages,
      [&](int rank, chorus_comm_t, chorus_mirrored_t m) -> int {
        std::vector<float> x(8, 1.0f), y(8, 1.0f);
        const char* first = rank == 0 ? "x" : "y";
        const char* second = rank == 0 ? "y" : "x";
        if (chorus_mirrored_add_variable(m, first, x.data(), nullptr, 8, CHORUS_FLOAT32) ||
            chorus_mirrored_add_variable(m, second, y.data(), nullptr, 8, CHORUS_FLOAT32))
          return 1;
        verdicts[rank] = chorus_mirrored_check_replicas(m, 0);
        return 0;
      });
  REQUIRE(all_zero(results));
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << messages[r]);
    CHECK(verdicts[r] == CHORUS_ERR_MISMATCH);
    CHECK(messages[r].find("rank 1 registered other variables than rank 0") != std::string::npos);
  }
}
