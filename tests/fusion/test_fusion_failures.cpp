// The fusion engine's verdicts and refusals through the C API, on thread
// ranks over shared memory, TCP and UCX: a tensor one rank never submits
// (the stall warning, then the timeout naming it and the rank), a rank that
// destroys its communicator with a peer's tensor pending, a known name
// resubmitted with another count; bf16 and f16 on the wire for the
// engine's float32 buckets; what a rank refuses on its own. The results
// and rounds: test_fusion.cpp.
//
// The meson test sets CHORUS_TIMEOUT=6 and CHORUS_FUSION_STALL_S=1 (the
// configuration is the process's).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "include/chorus.h"
#include "tests/api/api_harness.hpp"
#include "tests/common/log_capture.hpp"
#include "tests/fusion/fusion_plan.hpp"

using chorus::test::all_zero;
using chorus::test::run;
using chorus::test::transports;
using namespace chorus::test::fusion;

TEST_CASE("fused allreduce: a tensor one rank never submits fails everywhere, named", "[fusion]") {
  chorus::test::LogCapture log("fusion");
  const int n = 3;
  std::vector<std::string> messages(n);
  std::vector<double> seconds(n);
  auto results = run(n, [&](int rank, chorus_comm_t comm) -> int {
    std::vector<float> shared(64, float(rank + 1)), lonely(16, 1.0f);
    chorus_request_t a = nullptr, b = nullptr;
    const auto start = std::chrono::steady_clock::now();
    if (chorus_fused_allreduce(comm, "shared", shared.data(), shared.data(), shared.size(),
                               CHORUS_FLOAT32, CHORUS_SUM, &a))
      return 1;
    if (rank != n - 1 && chorus_fused_allreduce(comm, "lonely", lonely.data(), lonely.data(),
                                                lonely.size(), CHORUS_FLOAT32, CHORUS_SUM, &b))
      return 2;
    if (chorus_wait(&a, 0) != CHORUS_SUCCESS || shared[0] != 6.0f) return 3;
    chorus_result_t rc;
    if (rank != n - 1) {
      rc = chorus_wait(&b, 0);
    } else {
      // The rank without the tensor learns of the verdict at its next call.
      std::this_thread::sleep_for(std::chrono::seconds(8));
      rc = chorus_fused_allreduce(comm, "later", lonely.data(), lonely.data(), lonely.size(),
                                  CHORUS_FLOAT32, CHORUS_SUM, &b);
      if (rc == CHORUS_SUCCESS) rc = chorus_wait(&b, 0);
    }
    seconds[rank] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    messages[rank] = chorus_comm_last_error(comm);
    return rc == CHORUS_ERR_TIMEOUT ? 0 : 10 + int(rc);
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << messages[r]);
    CHECK(results[r] == 0);
    CHECK(messages[r].find("tensor 'lonely'") != std::string::npos);
    CHECK(messages[r].find("not by rank 2") != std::string::npos);
  }
  // At CHORUS_TIMEOUT (6 s), not at a multiple of it (a bound, generous for
  // a loaded machine, not a speed).
  CHECK(seconds[0] < 6 + 10);
  CHECK(seconds[0] >= 6 - 0.5);
  const auto warnings = log.matching("fusion stall");
  REQUIRE_FALSE(warnings.empty());
  CHECK(warnings.front().find("'lonely'") != std::string::npos);
  CHECK(warnings.front().find("not by rank 2") != std::string::npos);
}

TEST_CASE("fused allreduce: a rank that destroys its communicator fails the others' tensors, named",
          "[fusion]") {
  // Rank 1 leaves (run() destroys its communicator) with a tensor of rank 0
  // pending: rank 0's wait fails with a peer failure that names the rank and
  // the tensor, long before CHORUS_TIMEOUT (6 s), on every transport. Rank 1
  // leaves only once a cycle of rank 0 has taken the tensor in (two
  // negotiation rounds counted after the submission): a tensor still on its
  // way into the engine when the departure is learnt fails named, but without
  // the ranks that lacked it (no round compared the ranks' lists).
  for (const char* transport : transports()) {
    INFO("transport " << (transport ? transport : "default"));
    const int n = 2;
    std::string message, late_message;
    double seconds = 0;
    std::atomic<bool> taken_in{false};
    auto results = run(
        n,
        [&](int rank, chorus_comm_t comm) -> int {
          std::vector<float> shared(32, float(rank + 1)), orphan(8, 1.0f);
          chorus_request_t req = nullptr;
          if (chorus_fused_allreduce(comm, "shared", shared.data(), shared.data(), shared.size(),
                                     CHORUS_FLOAT32, CHORUS_SUM, &req) ||
              chorus_wait(&req, 0) || shared[0] != 3.0f)
            return 1;
          if (rank == 1) {
            chorus::test::wait_for(taken_in);
            return 0;
          }
          if (chorus_fused_allreduce(comm, "orphan", orphan.data(), orphan.data(), orphan.size(),
                                     CHORUS_FLOAT32, CHORUS_SUM, &req))
            return 2;
          const auto rounds = [&] {
            chorus_fusion_stats_t stats{};
            stats.size = sizeof stats;
            return chorus_fusion_stats(comm, &stats) == CHORUS_SUCCESS ? stats.cycles : 0;
          };
          const uint64_t first = rounds();
          const bool in_cycle = chorus::test::wait_until([&] { return rounds() >= first + 2; },
                                                         std::chrono::seconds(10));
          taken_in = true;
          if (!in_cycle) {  // the engine stopped cycling: no verdict to test
            chorus_wait(&req, 0);
            return 3;
          }
          const auto start = std::chrono::steady_clock::now();
          const chorus_result_t rc = chorus_wait(&req, 0);
          seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          message = chorus_comm_last_error(comm);
          // A submission after the engine stopped fails naming its own tensor.
          std::vector<float> late(4, 1.0f);
          const chorus_result_t late_rc =
              chorus_fused_allreduce(comm, "late", late.data(), late.data(), late.size(),
                                     CHORUS_FLOAT32, CHORUS_SUM, &req);
          late_message = chorus_comm_last_error(comm);
          if (late_rc != CHORUS_ERR_PEER_FAILURE) return 30 + int(late_rc);
          return rc == CHORUS_ERR_PEER_FAILURE ? 0 : 10 + int(rc);
        },
        transport);
    INFO("rank 0: " << message);
    CHECK(results[0] == 0);
    CHECK(results[1] == 0);
    CHECK(message.find("rank 1 shut down the fusion engine") != std::string::npos);
    CHECK(message.find("tensor 'orphan'") != std::string::npos);
    CHECK(message.find("not by rank 1") != std::string::npos);
    INFO("rank 0, later: " << late_message);
    CHECK(late_message.find("rank 1 shut down the fusion engine") != std::string::npos);
    CHECK(late_message.find("tensor 'late'") != std::string::npos);
    // A bound for a loaded machine, below the 6 s deadline: not a speed.
    CHECK(seconds < 4.5);
  }
}

TEST_CASE("fused allreduce: a known name resubmitted with another count is a mismatch",
          "[fusion]") {
  const int n = 2;
  std::vector<std::string> messages(n);
  auto results = run(n, [&](int rank, chorus_comm_t comm) -> int {
    std::vector<float> w(11, 1.0f);
    chorus_request_t req = nullptr;
    if (chorus_fused_allreduce(comm, "w", w.data(), w.data(), 10, CHORUS_FLOAT32, CHORUS_SUM,
                               &req) ||
        chorus_wait(&req, 0) || w[0] != 2.0f)
      return 1;
    const std::size_t count = rank == 1 ? 11 : 10;
    if (chorus_fused_allreduce(comm, "w", w.data(), w.data(), count, CHORUS_FLOAT32, CHORUS_SUM,
                               &req))
      return 2;
    const chorus_result_t rc = chorus_wait(&req, 0);
    messages[rank] = chorus_comm_last_error(comm);
    // The engine stays stopped with that error.
    chorus_request_t later = nullptr;
    if (chorus_fused_allreduce(comm, "x", w.data(), w.data(), 1, CHORUS_FLOAT32, CHORUS_SUM,
                               &later) != CHORUS_ERR_MISMATCH)
      return 3;
    return rc == CHORUS_ERR_MISMATCH ? 0 : 10 + int(rc);
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << messages[r]);
    CHECK(results[r] == 0);
    CHECK(messages[r].find("tensor 'w'") != std::string::npos);
    CHECK(messages[r].find("count 10") != std::string::npos);
    CHECK(messages[r].find("count 11") != std::string::npos);
    CHECK(messages[r].find("rank 0") != std::string::npos);
    CHECK(messages[r].find("rank 1") != std::string::npos);
  }
}

TEST_CASE("fused allreduce: bf16 and f16 on the wire for the engine's float32 buckets",
          "[fusion]") {
  // chorus_fusion_configure before the first fused call; float32 tensors
  // within the bound of the wire dtype (positive values: n roundings of
  // relative 2^-8 or 2^-11 at most), every rank bit-identical; other dtypes
  // exact; a configure after the first fused call refused.
  const int n = 3, tensors = 40;
  for (chorus_dtype_t wire : {CHORUS_BFLOAT16, CHORUS_FLOAT16}) {
    const double u = wire == CHORUS_BFLOAT16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    std::vector<std::vector<float>> results_of(n);
    std::vector<std::string> notes(n);
    std::vector<double> largest(n, 0.0);
    auto results = run(n, [&](int rank, chorus_comm_t comm) -> int {
      chorus_fusion_options_t options = CHORUS_FUSION_OPTIONS_INITIALIZER;
      options.wire_dtype = wire;
      if (chorus_fusion_configure(comm, &options)) return 1;
      std::vector<std::vector<float>> data(tensors);
      std::vector<int32_t> exact(100, rank + 1);
      std::vector<chorus_request_t> requests(tensors + 1, nullptr);
      for (int t = 0; t < tensors; ++t) {
        data[t].resize(std::size_t(1 + t * 13));
        for (std::size_t i = 0; i < data[t].size(); ++i)
          data[t][i] = 1.0f + float((i * 7 + std::size_t(t) + std::size_t(rank) * 3) % 97) / 10.0f;
        const std::string name = "w" + std::to_string(t);
        if (chorus_fused_allreduce(comm, name.c_str(), data[t].data(), data[t].data(),
                                   data[t].size(), CHORUS_FLOAT32, CHORUS_SUM, &requests[t]))
          return 2;
      }
      if (chorus_fused_allreduce(comm, "ints", exact.data(), exact.data(), exact.size(),
                                 CHORUS_INT32, CHORUS_SUM, &requests[tensors]))
        return 3;
      for (auto& r : requests)
        if (chorus_wait(&r, 0)) return 4;
      if (exact[0] != n * (n + 1) / 2) return 5;
      for (int t = 0; t < tensors; ++t)
        for (std::size_t i = 0; i < data[t].size(); ++i) {
          double want = 0;
          for (int q = 0; q < n; ++q)
            want +=
                double(1.0f + float((i * 7 + std::size_t(t) + std::size_t(q) * 3) % 97) / 10.0f);
          const double err = std::abs(double(data[t][i]) - want) / want;
          largest[rank] = std::max(largest[rank], err);
          if (err > std::pow(1 + u, n) - 1) {
            notes[rank] = "w" + std::to_string(t) + "[" + std::to_string(i) + "] error " +
                          std::to_string(err);
            return 6;
          }
          results_of[rank].push_back(data[t][i]);
        }
      if (chorus_fusion_configure(comm, &options) != CHORUS_ERR_INVALID_USAGE) return 7;
      return 0;
    });
    INFO("wire " << int(wire) << ": " << notes[0] << notes[1] << notes[2]);
    CHECK(all_zero(results));
    for (int r = 1; r < n; ++r) CHECK(results_of[r] == results_of[0]);
    // The data did travel rounded (tenths are not exact in either type).
    CHECK(largest[0] > 0);
  }
}

TEST_CASE("fused allreduce: local refusals", "[fusion]") {
  auto results = run(1, [&](int, chorus_comm_t comm) -> int {
    float x[4] = {1, 2, 3, 4};
    chorus_request_t a = nullptr;
    if (chorus_fused_allreduce(comm, "", x, x, 4, CHORUS_FLOAT32, CHORUS_SUM, &a) !=
        CHORUS_ERR_INVALID_ARGUMENT)
      return 1;
    if (chorus_fused_allreduce(comm, "x", x, x, 4, CHORUS_FLOAT32, CHORUS_SUM, nullptr) !=
        CHORUS_ERR_INVALID_ARGUMENT)
      return 2;
    return 0;
  });
  CHECK(all_zero(results));
  // A name already pending: refused (and, as every refusal, the communicator
  // fails). Rank 1 submits its part only once rank 0 has tried, so rank 0's
  // first submission is certainly still pending then (alone, a rank's
  // tensor may complete at any moment after it is submitted).
  std::string message;
  std::atomic<bool> tried{false};
  auto after_rank0_tried = [&] {
    for (int waited = 0; !tried.load() && waited < 20000; ++waited)  // bounded: 20 s
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  results = run(2, [&](int rank, chorus_comm_t comm) -> int {
    float x[4] = {1, 2, 3, 4}, y[4] = {};
    chorus_request_t a = nullptr, b = nullptr;
    if (rank == 1) {  // its verdict is rank 0's refusal: not what is tested
      after_rank0_tried();
      if (chorus_fused_allreduce(comm, "x", x, x, 4, CHORUS_FLOAT32, CHORUS_SUM, &a) == 0)
        chorus_wait(&a, 0);
      return 0;
    }
    if (chorus_fused_allreduce(comm, "x", x, x, 4, CHORUS_FLOAT32, CHORUS_SUM, &a)) return 1;
    const auto rc = chorus_fused_allreduce(comm, "x", y, y, 4, CHORUS_FLOAT32, CHORUS_SUM, &b);
    message = chorus_comm_last_error(comm);
    tried = true;
    chorus_wait(&a, 0);
    return rc == CHORUS_ERR_INVALID_ARGUMENT && b == nullptr ? 0 : 3;
  });
  CHECK(all_zero(results));
  CHECK(message.find("'x' is already pending") != std::string::npos);
  // The same when the name comes where the engine expects it from the last
  // steps' order (p, q, p: after q came p), so that no hash lookup runs.
  message.clear();
  tried = false;
  results = run(2, [&](int rank, chorus_comm_t comm) -> int {
    float p[2] = {1, 2}, q[2] = {3, 4};
    chorus_request_t rp = nullptr, rq = nullptr, again = nullptr;
    for (int step = 0; step < 3; ++step) {
      if (rank == 1 && step == 2) after_rank0_tried();
      const bool submitted =
          chorus_fused_allreduce(comm, "p", p, p, 2, CHORUS_FLOAT32, CHORUS_SUM, &rp) == 0 &&
          chorus_fused_allreduce(comm, "q", q, q, 2, CHORUS_FLOAT32, CHORUS_SUM, &rq) == 0;
      if (rank == 1 && step == 2) {  // after rank 0's refusal: any verdict
        chorus_wait(&rp, 0);
        chorus_wait(&rq, 0);
        return 0;
      }
      if (!submitted) return 10 + step;
      if (step < 2 && (chorus_wait(&rp, 0) || chorus_wait(&rq, 0))) return 20 + step;
    }
    const auto rc = chorus_fused_allreduce(comm, "p", q, q, 2, CHORUS_FLOAT32, CHORUS_SUM, &again);
    message = chorus_comm_last_error(comm);
    tried = true;
    chorus_wait(&rp, 0);
    chorus_wait(&rq, 0);
    return rc == CHORUS_ERR_INVALID_ARGUMENT && again == nullptr ? 0 : 3;
  });
  CHECK(all_zero(results));
  CHECK(message.find("'p' is already pending") != std::string::npos);
}
