// Finishing many requests at once: chorus_wait_all and chorus_test_all (C),
// chorus::wait_all (C++), and the C++ Work's error messages.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "include/chorus/chorus.hpp"
#include "tests/api/api_harness.hpp"

using chorus::test::all_zero;
using chorus::test::run;
using chorus::test::wait_for;

namespace {

bool every_request_null(const std::vector<chorus_request_t>& requests) {
  for (auto* r : requests)
    if (r) return false;
  return true;
}

}  // namespace

TEST_CASE("c api: wait_all finishes collectives, messages and fused tensors; NULL entries pass",
          "[api][requests]") {
  for (const char* transport : chorus::test::transports()) {
    INFO("transport " << (transport ? transport : "default"));
    auto results = run(
        2,
        [](int rank, chorus_comm_t comm) {
          std::vector<float> a(1000);
          for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(rank + 1) * float(i);
          int32_t fused[3] = {rank, 10 * rank, 100};
          int64_t mine = 7 + rank, theirs = -1;
          const int peer = 1 - rank;
          std::vector<chorus_request_t> requests(6, nullptr);
          if (chorus_iallreduce(comm, a.data(), a.data(), a.size(), CHORUS_FLOAT32, CHORUS_SUM,
                                &requests[0]))
            return 1;
          if (chorus_irecv(comm, &theirs, 1, CHORUS_INT64, peer, 5, &requests[1])) return 2;
          // requests[2] stays NULL: a finished request, as MPI_REQUEST_NULL.
          if (chorus_fused_allreduce(comm, "grad", fused, fused, 3, CHORUS_INT32, CHORUS_MAX,
                                     &requests[3]))
            return 3;
          if (chorus_isend(comm, &mine, 1, CHORUS_INT64, peer, 5, &requests[4])) return 4;
          if (chorus_ibarrier(comm, &requests[5])) return 5;
          std::vector<chorus_result_t> outcome(requests.size(), CHORUS_ERR_INTERNAL);
          if (chorus_wait_all(requests.size(), requests.data(), 0, outcome.data()) !=
              CHORUS_SUCCESS)
            return 6;
          if (!every_request_null(requests)) return 7;
          for (chorus_result_t r : outcome)
            if (r != CHORUS_SUCCESS) return 8;
          for (std::size_t i = 0; i < a.size(); ++i)
            if (a[i] != 3.0f * float(i)) return 9;
          if (fused[0] != 1 || fused[1] != 10 || fused[2] != 100) return 10;
          if (theirs != 7 + peer) return 11;
          // No results array, and nothing to wait for.
          if (chorus_wait_all(requests.size(), requests.data(), 0, nullptr) != CHORUS_SUCCESS)
            return 12;
          return chorus_wait_all(0, nullptr, 0, nullptr) == CHORUS_SUCCESS ? 0 : 13;
        },
        transport);
    CHECK(all_zero(results));
  }
}

TEST_CASE("c api: wait_all under one deadline: the late request stays valid, the rest are freed",
          "[api][requests]") {
  std::atomic<bool> timed_out{false};
  auto results = run(2, [&](int rank, chorus_comm_t comm) {
    int32_t x = rank + 1, message[2] = {0, 0};
    chorus_request_t requests[3] = {nullptr, nullptr, nullptr};
    if (rank == 0) {
      if (chorus_iallreduce(comm, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, &requests[1])) return 1;
      if (chorus_wait(&requests[1], 0) || x != 3) return 2;
      wait_for(timed_out);  // the messages go only after rank 1's deadline
      int32_t payload[2] = {42, 43};
      if (chorus_send(comm, &payload[0], 1, CHORUS_INT32, 1, 9, 0)) return 3;
      return chorus_send(comm, &payload[1], 1, CHORUS_INT32, 1, 10, 0) ? 3 : 0;
    }
    if (chorus_irecv(comm, &message[0], 1, CHORUS_INT32, 0, 9, &requests[0])) return 4;
    if (chorus_iallreduce(comm, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, &requests[1])) return 5;
    if (chorus_irecv(comm, &message[1], 1, CHORUS_INT32, 0, 10, &requests[2])) return 4;
    chorus_result_t outcome[3] = {CHORUS_ERR_INTERNAL, CHORUS_ERR_INTERNAL, CHORUS_ERR_INTERNAL};
    // Neither receive can finish before the deadline; the allreduce between
    // them has finished by then and is collected.
    const auto started = std::chrono::steady_clock::now();
    const chorus_result_t first = chorus_wait_all(3, requests, 1500, outcome);
    const auto waited = std::chrono::steady_clock::now() - started;
    timed_out = true;
    if (first != CHORUS_ERR_TIMEOUT) return 6;
    if (outcome[0] != CHORUS_ERR_TIMEOUT || outcome[1] != CHORUS_SUCCESS ||
        outcome[2] != CHORUS_ERR_TIMEOUT)
      return 7;
    if (requests[0] == nullptr || requests[1] != nullptr || requests[2] == nullptr || x != 3)
      return 8;
    if (waited < std::chrono::milliseconds(1500)) return 9;  // the deadline was kept
    // The first failure's message (each receive's own timeout text names its
    // tag: "... tag 9) timed out waiting on ..."), not the last one's.
    const std::string why = chorus_comm_last_error(comm);
    if (why.find("tag 9") == std::string::npos || why.find("timed out") == std::string::npos ||
        why.find("tag 10") != std::string::npos)
      return 10;
    // The requests that timed out are waited for again, and finish.
    if (chorus_wait_all(3, requests, 0, outcome) != CHORUS_SUCCESS) return 11;
    if (requests[0] || requests[2] || outcome[0] || outcome[2] || message[0] != 42 ||
        message[1] != 43)
      return 12;
    return chorus_comm_last_error(comm)[0] == '\0' ? 0 : 13;
  });
  CHECK(results[0] == 0);
  CHECK(results[1] == 0);
}

TEST_CASE("c api: wait_all returns the first failure in array order", "[api][requests]") {
  auto results = run(2, [](int rank, chorus_comm_t comm) {
    int32_t buf[4] = {1, 2, 3, 4};
    if (rank == 0) {
      // Three elements where the receiver expects four: a mismatch, which
      // fails the communicator on both ranks.
      const chorus_result_t rc = chorus_send(comm, buf, 3, CHORUS_INT32, 1, 11, 20000);
      return rc == CHORUS_SUCCESS || rc == CHORUS_ERR_MISMATCH || rc == CHORUS_ERR_ABORTED ? 0 : 1;
    }
    chorus_request_t requests[3] = {nullptr, nullptr, nullptr};
    if (chorus_irecv(comm, buf, 4, CHORUS_INT32, 0, 11, &requests[1])) return 2;
    if (chorus_irecv(comm, buf, 4, CHORUS_INT32, 0, 12, &requests[2])) return 3;
    chorus_result_t outcome[3] = {CHORUS_ERR_INTERNAL, CHORUS_ERR_INTERNAL, CHORUS_ERR_INTERNAL};
    const chorus_result_t first = chorus_wait_all(3, requests, 20000, outcome);
    if (first != CHORUS_ERR_MISMATCH) return 4;
    if (outcome[0] != CHORUS_SUCCESS || outcome[1] != CHORUS_ERR_MISMATCH) return 5;
    // The second receive fails with the communicator (not a timeout), later.
    if (outcome[2] == CHORUS_SUCCESS || outcome[2] == CHORUS_ERR_TIMEOUT) return 6;
    if (requests[1] != nullptr || requests[2] != nullptr) return 7;
    // The mismatch's message (the failed communicator's, for both).
    const std::string why = chorus_comm_last_error(comm);
    return why.find("count 3") != std::string::npos ? 0 : 8;
  });
  CHECK(results[0] == 0);
  CHECK(results[1] == 0);
}

TEST_CASE("c api: test_all frees nothing until every request has finished", "[api][requests]") {
  std::atomic<bool> tested{false};
  auto results = run(2, [&](int rank, chorus_comm_t comm) {
    int32_t x = rank + 1, message = 0;
    if (rank == 1) {
      if (chorus_allreduce(comm, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, 0) || x != 3) return 1;
      wait_for(tested);
      int32_t payload = 5;
      return chorus_send(comm, &payload, 1, CHORUS_INT32, 0, 4, 0) ? 2 : 0;
    }
    chorus_request_t requests[3] = {nullptr, nullptr, nullptr};
    if (chorus_iallreduce(comm, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, &requests[0])) return 3;
    if (chorus_irecv(comm, &message, 1, CHORUS_INT32, 1, 4, &requests[2])) return 4;
    if (chorus_wait(&requests[0], 0) || x != 3) return 5;
    // requests[0] is now NULL (finished); requests[2] waits for the message.
    chorus_request_t pending = requests[2];
    int done = -1;
    chorus_result_t outcome[3] = {CHORUS_ERR_INTERNAL, CHORUS_ERR_INTERNAL, CHORUS_ERR_INTERNAL};
    if (chorus_test_all(3, requests, &done, outcome) != CHORUS_SUCCESS) return 6;
    if (done != 0 || requests[2] != pending) return 7;
    tested = true;
    const bool finished = chorus::test::wait_until([&] {
      return chorus_test_all(3, requests, &done, outcome) != CHORUS_SUCCESS || done == 1;
    });
    if (!finished || done != 1) return 8;
    if (requests[2] != nullptr || outcome[2] != CHORUS_SUCCESS || message != 5) return 9;
    return outcome[0] == CHORUS_SUCCESS ? 0 : 10;
  });
  CHECK(results[0] == 0);
  CHECK(results[1] == 0);
}

TEST_CASE("c api: wait_all and test_all refuse bad arguments and touch nothing",
          "[api][requests]") {
  auto results = run(1, [](int, chorus_comm_t comm) {
    int32_t x = 4;
    chorus_request_t request = nullptr;
    if (chorus_iallreduce(comm, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, &request)) return 1;
    int done = 0;
    if (chorus_wait_all(1, nullptr, 0, nullptr) != CHORUS_ERR_INVALID_ARGUMENT) return 2;
    if (chorus_wait_all(1, &request, -1, nullptr) != CHORUS_ERR_INVALID_ARGUMENT) return 3;
    if (request == nullptr) return 4;
    if (std::strstr(chorus_comm_last_error(nullptr), "negative") == nullptr) return 5;
    if (chorus_test_all(1, &request, nullptr, nullptr) != CHORUS_ERR_INVALID_ARGUMENT) return 6;
    if (chorus_test_all(1, nullptr, &done, nullptr) != CHORUS_ERR_INVALID_ARGUMENT) return 7;
    // Listed twice, the first wait would free it under the second.
    chorus_request_t twice[3] = {request, nullptr, request};
    if (chorus_wait_all(3, twice, 0, nullptr) != CHORUS_ERR_INVALID_ARGUMENT) return 14;
    if (std::strstr(chorus_comm_last_error(nullptr), "requests[2] is listed twice") == nullptr)
      return 15;
    if (chorus_test_all(3, twice, &done, nullptr) != CHORUS_ERR_INVALID_ARGUMENT) return 16;
    if (request == nullptr || twice[0] != request || twice[2] != request) return 8;
    return chorus_wait_all(1, &request, 0, nullptr) == CHORUS_SUCCESS && request == nullptr &&
                   x == 4
               ? 0
               : 9;
  });
  CHECK(all_zero(results));
}

TEST_CASE("c++ api: a Work's failed wait carries its message; wait_all throws the first failure",
          "[api][requests]") {
  chorus::TcpStoreServer server(chorus::test::kToken);
  std::vector<int> results(2, -1);
  std::atomic<bool> timed_out{false};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        auto comm = chorus::Communicator::create(r, 2, server.address(), chorus::test::kToken);
        std::vector<float> v(4, float(r + 1));
        if (r == 1) {
          wait_for(timed_out);
          comm.allreduce_inplace(std::span<float>(v), chorus::Op::sum);
          results[1] = v[0] == 3.0f ? 0 : 1;
          return;
        }
        // 0 when wait() throws a timeout whose message holds `text`, else
        // `code` (rank 1 has not joined yet, so every wait times out).
        auto timed_out_saying = [](const std::function<void()>& wait, const char* text, int code) {
          try {
            wait();
          } catch (const chorus::Error& e) {
            const bool named = std::string(e.what()).find(text) != std::string::npos;
            return e.code() == CHORUS_ERR_TIMEOUT && named ? 0 : code;
          }
          return code;
        };
        chorus::Work w = comm.iallreduce_inplace(std::span<float>(v), chorus::Op::sum);
        // "timed out: chorus_wait: allreduce ... not finished after 20 ms"
        results[0] =
            timed_out_saying([&] { w.wait(std::chrono::milliseconds(20)); }, "allreduce", 3);
        if (results[0] != 0) return;
        std::vector<chorus::Work> works;
        works.push_back(std::move(w));
        results[0] = timed_out_saying(
            [&] { chorus::wait_all(works, std::chrono::milliseconds(20)); }, "chorus_wait_all", 5);
        if (results[0] != 0) return;
        timed_out = true;
        chorus::wait_all(works);
        results[0] = v[0] == 3.0f && works[0].test() ? 0 : 6;
      } catch (const std::exception& e) {
        UNSCOPED_INFO("rank " << r << ": " << e.what());
        results[static_cast<std::size_t>(r)] = 99;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(results[0] == 0);
  CHECK(results[1] == 0);
}
