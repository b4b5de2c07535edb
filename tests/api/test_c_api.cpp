// The C API, used as a program would: thread ranks of one process each call
// chorus_init with an explicit configuration against an in-process store.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "include/chorus.h"
#include "tests/api/api_harness.hpp"
#include "tests/common/api_rules.hpp"

using chorus::test::all_zero;
using chorus::test::kToken;
using chorus::test::last_error_is_per_communicator;
using chorus::test::requests_outlive_their_communicator;
using chorus::test::run;
using chorus::test::wait_for;

TEST_CASE("c api: version, result strings, rank and size") {
  CHECK(chorus_version() == CHORUS_VERSION);
  for (int code = 0; code < CHORUS_RESULT_COUNT_; ++code)
    CHECK(std::strlen(chorus_result_string(static_cast<chorus_result_t>(code))) > 0);
  auto results = run(3, [](int rank, chorus_comm_t comm) {
    int r = -1, s = -1;
    if (chorus_comm_rank(comm, &r) != CHORUS_SUCCESS || r != rank) return 1;
    if (chorus_comm_size(comm, &s) != CHORUS_SUCCESS || s != 3) return 2;
    return 0;
  });
  CHECK(all_zero(results));
}

TEST_CASE("c api: blocking collectives give the right answers") {
  const int n = 3;
  auto results = run(n, [n](int rank, chorus_comm_t comm) {
    std::vector<int64_t> in(1001), out(1001);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = int64_t(i) * (rank + 1);
    if (chorus_allreduce(comm, in.data(), out.data(), in.size(), CHORUS_INT64, CHORUS_SUM, 0))
      return 1;
    for (std::size_t i = 0; i < in.size(); ++i)
      if (out[i] != int64_t(i) * 6) return 2;  // 1 + 2 + 3
    std::vector<double> b(10, rank == 1 ? 3.5 : -1.0);
    for (std::size_t i = 0; i < b.size() && rank == 1; ++i) b[i] += double(i);
    if (chorus_broadcast(comm, b.data(), b.size(), CHORUS_FLOAT64, 1, 0)) return 3;
    for (std::size_t i = 0; i < b.size(); ++i)
      if (b[i] != 3.5 + double(i)) return 4;
    std::vector<int32_t> mine(4, rank), all(4 * n);
    if (chorus_allgather(comm, mine.data(), all.data(), 4, CHORUS_INT32, 0)) return 5;
    for (int i = 0; i < 4 * n; ++i)
      if (all[i] != i / 4) return 6;
    // Rank q contributes (i + q) * (q % 2 ? -1 : 1) at element i: the
    // largest changes rank from element to element.
    std::vector<float> rs_in(2 * n), rs_out(2, -1000.0f);
    for (int i = 0; i < 2 * n; ++i) rs_in[i] = float(i + rank) * (rank % 2 ? -1.0f : 1.0f);
    if (chorus_reduce_scatter(comm, rs_in.data(), rs_out.data(), 2, CHORUS_FLOAT32, CHORUS_MAX, 0))
      return 7;
    for (int i = 0; i < 2; ++i) {
      float want = -1e30f;
      for (int q = 0; q < n; ++q)
        want = std::max(want, float(2 * rank + i + q) * (q % 2 ? -1.0f : 1.0f));
      if (rs_out[i] != want) return 8;
    }
    if (chorus_barrier(comm, 0)) return 9;
    return 0;
  });
  CHECK(all_zero(results));
}

TEST_CASE("c api: non-blocking collectives run in order; wait and test") {
  auto results = run(2, [](int rank, chorus_comm_t comm) {
    std::vector<float> a(100000), b(7, rank == 0 ? 2.0f : -1.0f);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(rank + 1) * float(i % 1000);
    chorus_request_t r1 = nullptr, r2 = nullptr, r3 = nullptr;
    if (chorus_iallreduce(comm, a.data(), a.data(), a.size(), CHORUS_FLOAT32, CHORUS_SUM, &r1))
      return 1;
    if (chorus_ibroadcast(comm, b.data(), b.size(), CHORUS_FLOAT32, 0, &r2)) return 2;
    if (chorus_ibarrier(comm, &r3)) return 3;
    if (chorus_wait(&r1, 20000) != CHORUS_SUCCESS || r1 != nullptr) return 4;
    int done = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done && std::chrono::steady_clock::now() < deadline) {
      if (chorus_test(&r2, &done) != CHORUS_SUCCESS) return 5;
      if (!done) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (!done || r2 != nullptr) return 6;
    if (chorus_wait(&r3, 20000) != CHORUS_SUCCESS) return 7;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a[i] != 3.0f * float(i % 1000)) return 8;
    for (float v : b)
      if (v != 2.0f) return 8;
    // A blocking call after non-blocking ones keeps the order.
    int32_t x = rank;
    if (chorus_allreduce(comm, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, 0) || x != 1) return 9;
    return 0;
  });
  CHECK(all_zero(results));
}

TEST_CASE("c api: blocking calls behind outstanding non-blocking ones keep the order") {
  // Alternates blocking calls with nothing outstanding (their turn taken at
  // once) and blocking calls queued behind a non-blocking one (their turn
  // waited for); every call's values differ, so any reordering shows.
  auto results = run(2, [](int rank, chorus_comm_t comm) {
    for (int i = 0; i < 300; ++i) {
      const std::size_t n = i % 5 == 0 ? 100000 : 3;
      std::vector<int32_t> a(n);
      for (std::size_t k = 0; k < n; ++k) a[k] = rank + i + int32_t(k);
      chorus_request_t req = nullptr;
      const bool queued = i % 3 != 0;
      if (queued && chorus_iallreduce(comm, a.data(), a.data(), n, CHORUS_INT32, CHORUS_SUM, &req))
        return 1;
      int32_t x = rank * 10 + i;
      if (chorus_allreduce(comm, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, 0) || x != 10 + 2 * i)
        return 2;
      if (queued) {
        if (chorus_wait(&req, 20000) != CHORUS_SUCCESS) return 3;
        for (std::size_t k = 0; k < n; ++k)
          if (a[k] != 1 + 2 * i + 2 * int32_t(k)) return 4;
      }
    }
    return 0;
  });
  CHECK(all_zero(results));
}

TEST_CASE("c api: waits without a timeout run queued calls in order, whoever runs them") {
  // chorus_wait(request, 0) runs calls that have not started on the waiting thread
  // (the worker may have taken some first); waiting for the last of three
  // runs all three in order, and waiting for the earlier ones then just returns.
  auto results = run(2, [](int rank, chorus_comm_t comm) {
    for (int i = 0; i < 200; ++i) {
      std::vector<int32_t> a(i % 7 == 0 ? 50000 : 5), b(3);
      for (std::size_t k = 0; k < a.size(); ++k) a[k] = rank + i + int32_t(k);
      for (std::size_t k = 0; k < b.size(); ++k) b[k] = 2 * rank + i - int32_t(k);
      int32_t x = rank * 100 + i;
      chorus_request_t r1 = nullptr, r2 = nullptr, r3 = nullptr;
      if (chorus_iallreduce(comm, a.data(), a.data(), a.size(), CHORUS_INT32, CHORUS_SUM, &r1) ||
          chorus_iallreduce(comm, b.data(), b.data(), b.size(), CHORUS_INT32, CHORUS_MAX, &r2) ||
          chorus_iallreduce(comm, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, &r3))
        return 1;
      if (chorus_wait(&r3, 0) != CHORUS_SUCCESS || r3 != nullptr) return 2;
      if (chorus_wait(&r1, 0) != CHORUS_SUCCESS || chorus_wait(&r2, 0) != CHORUS_SUCCESS) return 3;
      if (x != 100 + 2 * i) return 4;
      for (std::size_t k = 0; k < a.size(); ++k)
        if (a[k] != 1 + 2 * i + 2 * int32_t(k)) return 5;
      for (std::size_t k = 0; k < b.size(); ++k)
        if (b[k] != 2 + i - int32_t(k)) return 6;
    }
    return 0;
  });
  CHECK(all_zero(results));
}

TEST_CASE("c api: a blocking call stuck behind a non-blocking one times out and aborts") {
  std::atomic<bool> rank0_gave_up{false};
  auto results = run(2, [&](int rank, chorus_comm_t comm) {
    int32_t x = 1;
    if (rank == 1) {
      // Absent until rank 0 has given up. Its first call may still complete
      // (rank 0's input was posted before the abort); the next must fail,
      // promptly.
      wait_for(rank0_gave_up);
      auto start = std::chrono::steady_clock::now();
      bool failed = false;
      for (int i = 0; i < 2 && !failed; ++i)
        failed =
            chorus_allreduce(comm, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, 20000) != CHORUS_SUCCESS;
      return failed && std::chrono::steady_clock::now() - start < std::chrono::seconds(10) ? 0 : 10;
    }
    chorus_request_t req = nullptr;
    if (chorus_iallreduce(comm, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, &req)) return 1;
    int32_t y = 2;
    const bool timed_out =
        chorus_allreduce(comm, &y, &y, 1, CHORUS_INT32, CHORUS_SUM, 50) == CHORUS_ERR_TIMEOUT;
    const bool names_earlier_calls =
        std::strstr(chorus_comm_last_error(comm), "earlier calls") != nullptr;
    // The outstanding call ends with the abort (rank 1 stays away until it
    // has: nothing but the abort can end it), and later calls are refused.
    const bool outstanding_failed = chorus_wait(&req, 20000) != CHORUS_SUCCESS;
    rank0_gave_up = true;
    if (!timed_out) return 2;
    if (!names_earlier_calls) return 3;
    if (!outstanding_failed) return 4;
    if (chorus_barrier(comm, 1000) != CHORUS_ERR_ABORTED) return 5;
    return 0;
  });
  CHECK(results[0] == 0);
  CHECK(results[1] == 0);
}

TEST_CASE("c api: a wait that times out leaves the request valid") {
  std::atomic<bool> rank0_timed_out{false};
  auto results = run(2, [&](int rank, chorus_comm_t comm) {
    int32_t x = 1;
    if (rank == 1) {
      wait_for(rank0_timed_out);  // a late partner
      return chorus_allreduce(comm, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, 0) == CHORUS_SUCCESS &&
                     x == 2
                 ? 0
                 : 1;
    }
    chorus_request_t req = nullptr;
    if (chorus_iallreduce(comm, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, &req)) return 2;
    const bool timed_out = chorus_wait(&req, 20) == CHORUS_ERR_TIMEOUT;
    rank0_timed_out = true;
    if (!timed_out || req == nullptr) return 3;
    if (std::strstr(chorus_comm_last_error(comm), "allreduce") == nullptr) return 4;
    if (chorus_wait(&req, 20000) != CHORUS_SUCCESS || x != 2) return 5;
    return 0;
  });
  CHECK(all_zero(results));
}

namespace {

// A call that rank 0 makes with one bad argument while rank 1 makes the valid
// call it stands for (30 s deadline). Both must fail with
// CHORUS_ERR_INVALID_ARGUMENT, rank 1 at once (not at its deadline), with a
// message that names rank 0 and contains `keyword`; the communicator is then
// failed on both (a later call: CHORUS_ERR_ABORTED).
struct BadCall {
  const char* name;
  const char* keyword;
  std::function<chorus_result_t(chorus_comm_t, float*)> bad, good;
};

chorus_result_t allreduce8(chorus_comm_t comm, float* buf) {
  return chorus_allreduce(comm, buf, buf, 8, CHORUS_FLOAT32, CHORUS_SUM, 30000);
}

}  // namespace

TEST_CASE("c api: a call refused for its arguments fails it on every rank, at once") {
  const std::vector<BadCall> cases = {
      {"null sendbuf", "NULL",
       [](chorus_comm_t c, float* b) {
         return chorus_allreduce(c, nullptr, b, 8, CHORUS_FLOAT32, CHORUS_SUM, 30000);
       },
       allreduce8},
      {"unknown dtype", "dtype",
       [](chorus_comm_t c, float* b) {
         return chorus_allreduce(c, b, b, 8, static_cast<chorus_dtype_t>(99), CHORUS_SUM, 30000);
       },
       allreduce8},
      {"unknown op", "op",
       [](chorus_comm_t c, float* b) {
         return chorus_allreduce(c, b, b, 8, CHORUS_FLOAT32, static_cast<chorus_op_t>(42), 30000);
       },
       allreduce8},
      {"partial overlap", "overlap",
       [](chorus_comm_t c, float* b) {
         return chorus_allreduce(c, b, b + 1, 4, CHORUS_FLOAT32, CHORUS_SUM, 30000);
       },
       [](chorus_comm_t c, float* b) {
         return chorus_allreduce(c, b, b, 4, CHORUS_FLOAT32, CHORUS_SUM, 30000);
       }},
      {"no such root", "root",
       [](chorus_comm_t c, float* b) {
         return chorus_broadcast(c, b, 8, CHORUS_FLOAT32, 2, 30000);
       },
       [](chorus_comm_t c, float* b) {
         return chorus_broadcast(c, b, 8, CHORUS_FLOAT32, 0, 30000);
       }},
      {"negative timeout", "negative",
       [](chorus_comm_t c, float* b) {
         return chorus_allreduce(c, b, b, 8, CHORUS_FLOAT32, CHORUS_SUM, -5);
       },
       allreduce8},
      {"non-blocking, null recvbuf", "NULL",
       [](chorus_comm_t c, float* b) {
         chorus_request_t req = nullptr;
         return chorus_iallreduce(c, b, nullptr, 8, CHORUS_FLOAT32, CHORUS_SUM, &req);
       },
       [](chorus_comm_t c, float* b) {
         chorus_request_t req = nullptr;
         chorus_result_t rc = chorus_iallreduce(c, b, b, 8, CHORUS_FLOAT32, CHORUS_SUM, &req);
         return rc ? rc : chorus_wait(&req, 30000);
       }},
  };
  for (const auto& bad : cases) {
    INFO(bad.name);
    std::vector<std::string> messages(2);
    std::vector<double> seconds(2);
    auto results = run(2, [&](int rank, chorus_comm_t comm) {
      float buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
      const auto t0 = std::chrono::steady_clock::now();
      const chorus_result_t rc = rank == 0 ? bad.bad(comm, buf) : bad.good(comm, buf);
      seconds[rank] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      messages[rank] = chorus_comm_last_error(comm);
      if (rc != CHORUS_ERR_INVALID_ARGUMENT) return 1;
      if (chorus_barrier(comm, 30000) != CHORUS_ERR_ABORTED) return 2;
      return 0;
    });
    INFO("rank 0: " << messages[0] << "\nrank 1: " << messages[1]);
    CHECK(results == std::vector<int>{0, 0});
    for (const auto& m : messages) {
      CHECK(m.find("rank 0") != std::string::npos);
      CHECK(m.find(bad.keyword) != std::string::npos);
    }
    CHECK(seconds[1] < 10.0);
  }
}

TEST_CASE("c api: errors before a communicator is known concern nobody else") {
  auto results = run(2, [](int rank, chorus_comm_t comm) {
    float buf[8] = {};
    if (chorus_allreduce(nullptr, buf, buf, 8, CHORUS_FLOAT32, CHORUS_SUM, 0) == CHORUS_SUCCESS)
      return 1;
    if (chorus_iallreduce(comm, buf, buf, 8, CHORUS_FLOAT32, CHORUS_SUM, nullptr) !=
        CHORUS_ERR_INVALID_ARGUMENT)
      return 2;  // no request out-pointer: refused before any call is made
    // Zero-count calls with NULL buffers are fine.
    if (chorus_allreduce(comm, nullptr, nullptr, 0, CHORUS_FLOAT32, CHORUS_SUM, 0)) return 3;
    buf[0] = float(rank + 1);
    if (chorus_allreduce(comm, buf, buf, 1, CHORUS_FLOAT32, CHORUS_SUM, 0) != CHORUS_SUCCESS ||
        buf[0] != 3.0f)
      return 4;
    return 0;
  });
  CHECK(all_zero(results));
}

TEST_CASE("c api: the last error is kept per communicator") {
  auto results = run(2, [](int rank, chorus_comm_t comm) {
    chorus_comm_t child = nullptr;
    if (chorus_comm_split(comm, 0, rank, &child) || !child) return 1;
    if (const char* broke = last_error_is_per_communicator(comm, child, 2)) {
      std::fprintf(stderr, "rank %d: %s\n", rank, broke);
      return 2;
    }
    const std::string failed_message = chorus_comm_last_error(comm);
    // A call on the child (failed with comm: they share connections) has its
    // own message; comm's is still the first one.
    if (chorus_barrier(child, 0) == CHORUS_SUCCESS) return 7;
    if (std::strlen(chorus_comm_last_error(child)) == 0) return 8;
    if (failed_message != chorus_comm_last_error(comm)) return 9;
    // Another thread has messages of its own.
    std::string other_thread = "unset";
    std::thread([&] { other_thread = chorus_comm_last_error(comm); }).join();
    if (!other_thread.empty()) return 10;
    return chorus_comm_destroy(child) == CHORUS_SUCCESS ? 0 : 11;
  });
  CHECK(all_zero(results));
}

TEST_CASE("c api: a request outliving its communicator is finished and freed by wait") {
  auto results = run(2, [](int rank, chorus_comm_t comm) {
    if (const char* broke = requests_outlive_their_communicator(rank, 2, comm)) {
      std::fprintf(stderr, "rank %d: %s\n", rank, broke);
      return 1;
    }
    return 0;
  });
  CHECK(all_zero(results));
}

TEST_CASE("c api: abort fails the other ranks quickly; destroyed handles are refused") {
  auto results = run(3, [](int rank, chorus_comm_t comm) {
    if (rank == 0) {
      if (chorus_comm_abort(comm, "test abort")) return 1;
      int32_t x = 0;
      return chorus_allreduce(comm, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, 0) == CHORUS_ERR_ABORTED
                 ? 0
                 : 2;
    }
    std::vector<float> v(1000, 1.0f);
    auto start = std::chrono::steady_clock::now();
    chorus_result_t rc =
        chorus_allreduce(comm, v.data(), v.data(), v.size(), CHORUS_FLOAT32, CHORUS_SUM, 30000);
    auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rc != CHORUS_ERR_ABORTED) return 3;
    if (std::strstr(chorus_comm_last_error(comm), "test abort") == nullptr) return 4;
    return seconds < 10 ? 0 : 5;
  });
  CHECK(all_zero(results));

  chorus::TcpStoreServer server(kToken);
  const std::string addr = server.address();
  chorus_init_config_t config = CHORUS_INIT_CONFIG_INITIALIZER;
  config.rank = 0;
  config.world_size = 1;
  config.store_addr = addr.c_str();
  config.job_token = kToken;
  chorus_comm_t comm = nullptr;
  REQUIRE(chorus_init(&config, &comm) == CHORUS_SUCCESS);
  float x = 2.0f;
  CHECK(chorus_allreduce(comm, &x, &x, 1, CHORUS_FLOAT32, CHORUS_PROD, 0) == CHORUS_SUCCESS);
  CHECK(x == 2.0f);
  REQUIRE(chorus_comm_destroy(comm) == CHORUS_SUCCESS);
  int rank = -1;
  CHECK(chorus_comm_rank(comm, &rank) == CHORUS_ERR_INVALID_USAGE);
  CHECK(chorus_comm_destroy(comm) == CHORUS_ERR_INVALID_USAGE);
}

TEST_CASE("c api: init validates its configuration") {
  chorus_init_config_t config = CHORUS_INIT_CONFIG_INITIALIZER;
  chorus_comm_t comm = nullptr;
  config.rank = 3;
  config.world_size = 2;
  config.store_addr = "127.0.0.1:1";
  CHECK(chorus_init(&config, &comm) == CHORUS_ERR_INVALID_ARGUMENT);
  CHECK(comm == nullptr);
  config.rank = 0;
  config.store_addr = nullptr;
  CHECK(chorus_init(&config, &comm) == CHORUS_ERR_INVALID_ARGUMENT);
  config = CHORUS_INIT_CONFIG_INITIALIZER;
  config.size = 4;  // a caller built against a different struct
  CHECK(chorus_init(&config, &comm) == CHORUS_ERR_INVALID_ARGUMENT);
  CHECK(chorus_init(nullptr, &comm) == CHORUS_ERR_INVALID_ARGUMENT);
}
