// The C API's newer calls as a program uses them, over the default transport
// (shared memory between the thread ranks), TCP and UCX: reduce, gather,
// scatter, alltoall and the v-variants (blocking and not), point-to-point
// messages, and chorus_comm_split.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "include/chorus.h"
#include "tests/api/api_harness.hpp"

using chorus::test::all_zero;
using chorus::test::run;
using chorus::test::transports;

namespace {

int64_t value(int rank, std::size_t i) {
  return int64_t(rank + 1) * 1000003 + int64_t(i) * 7;
}

// Every newer collective, results checked in full; returns 0 or a code
// naming the first failure.
int newer_collectives(int rank, chorus_comm_t comm, int n, std::atomic<int>& finished) {
  const std::size_t count = 1001;
  const int root = n - 1;
  // reduce (blocking and not)
  std::vector<int64_t> in(count), out(count, -1);
  for (std::size_t i = 0; i < count; ++i) in[i] = value(rank, i);
  if (chorus_reduce(comm, in.data(), rank == root ? out.data() : nullptr, count, CHORUS_INT64,
                    CHORUS_SUM, root, 0))
    return 1;
  if (rank == root)
    for (std::size_t i = 0; i < count; ++i) {
      int64_t want = 0;
      for (int q = 0; q < n; ++q) want += value(q, i);
      if (out[i] != want) return 2;
    }
  chorus_request_t req = nullptr;
  std::vector<int64_t> mx(count, -1);
  if (chorus_ireduce(comm, in.data(), mx.data(), count, CHORUS_INT64, CHORUS_MAX, 0, &req) ||
      chorus_wait(&req, 0))
    return 3;
  if (rank == 0)
    for (std::size_t i = 0; i < count; ++i)
      if (mx[i] != value(n - 1, i)) return 4;
  // gather / scatter
  std::vector<int64_t> all(count * static_cast<std::size_t>(n), -1);
  if (chorus_gather(comm, in.data(), all.data(), count, CHORUS_INT64, root, 0)) return 5;
  if (rank == root)
    for (std::size_t i = 0; i < all.size(); ++i)
      if (all[i] != value(static_cast<int>(i / count), i % count)) return 6;
  std::vector<int64_t> mine(count, -1);
  if (chorus_iscatter(comm, all.data(), mine.data(), count, CHORUS_INT64, root, &req) ||
      chorus_wait(&req, 0))
    return 7;
  for (std::size_t i = 0; i < count; ++i)
    if (mine[i] != value(rank, i)) return 8;
  // alltoall: block j of rank r holds r * 100 + j.
  std::vector<int32_t> a2a_in(static_cast<std::size_t>(n) * 3), a2a_out(a2a_in.size(), -1);
  for (std::size_t i = 0; i < a2a_in.size(); ++i) a2a_in[i] = rank * 100 + int32_t(i / 3);
  if (chorus_alltoall(comm, a2a_in.data(), a2a_out.data(), 3, CHORUS_INT32, 0)) return 9;
  for (std::size_t i = 0; i < a2a_out.size(); ++i)
    if (a2a_out[i] != int32_t(i / 3) * 100 + rank) return 10;
  // allgatherv / reduce_scatterv with uneven counts (rank r: r + 1 elements)
  std::vector<size_t> counts(static_cast<std::size_t>(n));
  std::size_t total = 0;
  for (int r = 0; r < n; ++r) total += counts[static_cast<std::size_t>(r)] = std::size_t(r) + 1;
  std::vector<float> v_in(std::size_t(rank) + 1, float(rank)), v_out(total, -1);
  if (chorus_iallgatherv(comm, v_in.data(), v_out.data(), counts.data(), CHORUS_FLOAT32, &req))
    return 11;
  counts.assign(counts.size(), 0);  // copied at the call: changing it now changes nothing
  if (chorus_wait(&req, 0)) return 12;
  for (std::size_t i = 0, r = 0; r < std::size_t(n); ++r)
    for (std::size_t k = 0; k <= r; ++k, ++i)
      if (v_out[i] != float(r)) return 13;
  for (int r = 0; r < n; ++r) counts[static_cast<std::size_t>(r)] = std::size_t(r) + 1;
  std::vector<float> rs_in(total), rs_out(std::size_t(rank) + 1, -1);
  for (std::size_t i = 0; i < total; ++i) rs_in[i] = float(i) + float(rank);
  if (chorus_reduce_scatterv(comm, rs_in.data(), rs_out.data(), counts.data(), CHORUS_FLOAT32,
                             CHORUS_SUM, 0))
    return 14;
  std::size_t offset = std::size_t(rank) * (std::size_t(rank) + 1) / 2;
  for (std::size_t k = 0; k < rs_out.size(); ++k)
    if (rs_out[k] != float(n) * float(offset + k) + float(n * (n - 1) / 2)) return 15;
  // Bad arguments are refused with a message; the communicator is then
  // failed on every rank.
  chorus::test::all_arrive(finished, n);
  if (chorus_gather(comm, in.data(), nullptr, count, CHORUS_INT64, n, 0) !=
      CHORUS_ERR_INVALID_ARGUMENT)
    return 16;
  if (!std::strstr(chorus_comm_last_error(comm), "root")) return 17;
  if (chorus_allgatherv(comm, v_in.data(), v_out.data(), nullptr, CHORUS_FLOAT32, 0) !=
      CHORUS_ERR_INVALID_ARGUMENT)
    return 18;
  return chorus_barrier(comm, 0) == CHORUS_ERR_ABORTED ? 0 : 19;
}

}  // namespace

TEST_CASE("c api: reduce, gather, scatter, alltoall and the v-variants", "[api]") {
  for (const char* transport : transports()) {
    for (int n : {1, 2, 3, 4}) {
      std::atomic<int> finished{0};
      INFO("ranks " << n << " transport " << (transport ? transport : "default"));
      auto results = run(
          n,
          [n, &finished](int rank, chorus_comm_t comm) {
            return newer_collectives(rank, comm, n, finished);
          },
          transport);
      CHECK(all_zero(results));
    }
  }
}

TEST_CASE("c api: many messages on several tags arrive in order per (peer, tag)", "[api][p2p]") {
  for (const char* transport : transports()) {
    INFO("transport " << (transport ? transport : "default"));
    const int n = 3, per_tag = 40, tags = 3;
    auto results = run(
        n,
        [](int rank, chorus_comm_t comm) {
          // Every rank sends per_tag messages on each tag to each peer, all at
          // once, sizes varying, while receives are posted in another order
          // (tags backwards); a collective in the middle must not disturb them.
          std::vector<std::vector<int32_t>> out, in;
          std::vector<chorus_request_t> reqs;
          std::vector<std::pair<int, int>> expect;  // (peer, tag, i) encoded below
          std::vector<int> expect_i;
          for (int peer = 0; peer < n; ++peer) {
            if (peer == rank) continue;
            for (int tag = tags - 1; tag >= 0; --tag)
              for (int i = 0; i < per_tag; ++i) {
                in.emplace_back(std::size_t(1 + (i * 37 + tag) % 300), -1);
                chorus_request_t r = nullptr;
                if (chorus_irecv(comm, in.back().data(), in.back().size(), CHORUS_INT32, peer,
                                 tag * 1000, &r))
                  return 1;
                reqs.push_back(r);
                expect.emplace_back(peer, tag);
                expect_i.push_back(i);
              }
          }
          int x = rank;
          if (chorus_allreduce(comm, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, 0) || x != 3) return 2;
          for (int peer = 0; peer < n; ++peer) {
            if (peer == rank) continue;
            for (int i = 0; i < per_tag; ++i)
              for (int tag = 0; tag < tags; ++tag) {
                out.emplace_back(std::size_t(1 + (i * 37 + tag) % 300));
                for (std::size_t k = 0; k < out.back().size(); ++k)
                  out.back()[k] = rank * 1000000 + tag * 10000 + i * 100 + int32_t(k % 100);
                chorus_request_t r = nullptr;
                if (chorus_isend(comm, out.back().data(), out.back().size(), CHORUS_INT32, peer,
                                 tag * 1000, &r))
                  return 3;
                reqs.push_back(r);
              }
          }
          for (auto& r : reqs)
            if (chorus_wait(&r, 0)) return 4;
          for (std::size_t m = 0; m < in.size(); ++m) {
            auto [peer, tag] = expect[m];
            const int i = expect_i[m];
            for (std::size_t k = 0; k < in[m].size(); ++k)
              if (in[m][k] != peer * 1000000 + tag * 10000 + i * 100 + int32_t(k % 100)) return 5;
          }
          return 0;
        },
        transport);
    CHECK(all_zero(results));
  }
}

TEST_CASE("c api: a refused message fails the peer waiting for it, at once", "[api][p2p]") {
  using Refused = std::function<chorus_result_t(chorus_comm_t, int32_t*)>;
  const std::vector<std::pair<const char*, Refused>> cases = {
      {"to itself",
       [](chorus_comm_t c, int32_t* b) { return chorus_send(c, b, 8, CHORUS_INT32, 0, 0, 0); }},
      {"tag",
       [](chorus_comm_t c, int32_t* b) {
         return chorus_send(c, b, 8, CHORUS_INT32, 1, CHORUS_TAG_MAX + 1, 0);
       }},
      {"peer 5",
       [](chorus_comm_t c, int32_t* b) { return chorus_send(c, b, 8, CHORUS_INT32, 5, 0, 0); }},
      {"NULL",
       [](chorus_comm_t c, int32_t*) { return chorus_send(c, nullptr, 8, CHORUS_INT32, 1, 0, 0); }},
  };
  for (const auto& [keyword, refused] : cases) {
    INFO(keyword);
    double waited = -1;
    std::string message;
    auto results = run(2, [&](int rank, chorus_comm_t comm) {
      int32_t buf[8] = {};
      if (rank == 0) return refused(comm, buf) == CHORUS_ERR_INVALID_ARGUMENT ? 0 : 1;
      const auto t0 = std::chrono::steady_clock::now();
      const chorus_result_t rc = chorus_recv(comm, buf, 8, CHORUS_INT32, 0, 0, 30000);
      waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      message = chorus_comm_last_error(comm);
      return rc == CHORUS_ERR_INVALID_ARGUMENT ? 0 : 2;
    });
    INFO(message);
    CHECK(all_zero(results));
    CHECK(message.find(keyword) != std::string::npos);
    CHECK(waited < 10.0);
  }
}

TEST_CASE("c api: point-to-point mismatches and deadlines", "[api][p2p]") {
  auto results = run(2, [](int rank, chorus_comm_t comm) {
    // A blocking exchange in both directions (rank 0 sends first).
    int32_t mine[4] = {rank, rank + 10, rank + 20, rank + 30}, theirs[4] = {};
    if (rank == 0) {
      if (chorus_send(comm, mine, 4, CHORUS_INT32, 1, 7, 0)) return 5;
      if (chorus_recv(comm, theirs, 4, CHORUS_INT32, 1, 7, 0)) return 6;
    } else {
      if (chorus_recv(comm, theirs, 4, CHORUS_INT32, 0, 7, 0)) return 7;
      if (chorus_send(comm, mine, 4, CHORUS_INT32, 0, 7, 0)) return 8;
    }
    for (int k = 0; k < 4; ++k)
      if (theirs[k] != (1 - rank) + 10 * k) return 9;
    // A non-blocking receive whose wait times out stays valid.
    chorus_request_t r = nullptr;
    if (rank == 1) {
      if (chorus_irecv(comm, theirs, 4, CHORUS_INT32, 0, 9, &r)) return 10;
      if (chorus_wait(&r, 30) != CHORUS_ERR_TIMEOUT || r == nullptr) return 11;
    }
    int32_t go = 0;
    if (chorus_allreduce(comm, &go, &go, 1, CHORUS_INT32, CHORUS_SUM, 0)) return 12;
    if (rank == 0 && chorus_send(comm, mine, 4, CHORUS_INT32, 1, 9, 0)) return 13;
    if (rank == 1 && (chorus_wait(&r, 0) || theirs[3] != 30)) return 14;
    // A count that differs is a mismatch on both sides' communicators.
    if (rank == 0) {
      chorus_result_t rc = chorus_send(comm, mine, 3, CHORUS_INT32, 1, 11, 20000);
      // The send may complete before the receiver sees the difference.
      if (rc != CHORUS_SUCCESS && rc != CHORUS_ERR_MISMATCH && rc != CHORUS_ERR_ABORTED) return 15;
      int32_t y = 0;
      if (chorus_allreduce(comm, &y, &y, 1, CHORUS_INT32, CHORUS_SUM, 20000) == CHORUS_SUCCESS)
        return 16;  // the peer aborted
      return 0;
    }
    chorus_result_t rc = chorus_recv(comm, theirs, 4, CHORUS_INT32, 0, 11, 20000);
    if (rc != CHORUS_ERR_MISMATCH) return 17;
    const char* why = chorus_comm_last_error(comm);
    if (!std::strstr(why, "send") || !std::strstr(why, "count 3") || !std::strstr(why, "count 4"))
      return 18;
    return 0;
  });
  CHECK(results[0] == 0);
  CHECK(results[1] == 0);
}
