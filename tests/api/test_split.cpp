// chorus_comm_split as MPI_Comm_split: colors and keys, a color with one rank,
// CHORUS_UNDEFINED, splits of splits, parents and children used in turn,
// mismatches on a child named in both numberings, a parent destroyed first.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "include/chorus.h"
#include "tests/api/api_harness.hpp"

using chorus::test::all_zero;
using chorus::test::run;

namespace {

// The parent ranks of `comm`'s ranks, in its order (an allgather of them).
std::vector<int32_t> members(chorus_comm_t comm, int parent_rank) {
  int size = 0;
  chorus_comm_size(comm, &size);
  std::vector<int32_t> out(static_cast<std::size_t>(size), -1);
  int32_t mine = parent_rank;
  if (chorus_allgather(comm, &mine, out.data(), 1, CHORUS_INT32, 0)) return {};
  return out;
}

}  // namespace

TEST_CASE("split: colors, keys, one-rank colors, CHORUS_UNDEFINED and splits of splits",
          "[api][split]") {
  for (const char* transport : {static_cast<const char*>(nullptr), "tcp"}) {
    INFO("transport " << (transport ? transport : "default"));
    const int n = 6;
    auto results = run(
        n,
        [](int rank, chorus_comm_t world) {
          // Colors: even ranks 0, odd ranks 1 except rank 5 alone (9); rank 3 none.
          // Keys reverse the order within a color.
          int color = rank == 5 ? 9 : rank == 3 ? CHORUS_UNDEFINED : rank % 2;
          chorus_comm_t child = nullptr;
          if (chorus_comm_split(world, color, n - rank, &child)) return 1;
          if (color == CHORUS_UNDEFINED) {
            if (child != nullptr) return 2;
            // Still a rank of the parent: its collectives need this rank too.
            for (int i = 0; i < 20; ++i) {
              int64_t p = rank + i;
              if (chorus_allreduce(world, &p, &p, 1, CHORUS_INT64, CHORUS_SUM, 0)) return 7;
              if (p != 15 + 6 * i) return 8;
            }
            return chorus_barrier(world, 0) ? 14 : 0;
          }
          if (!child) return 3;
          std::vector<int32_t> want = color == 0   ? std::vector<int32_t>{4, 2, 0}
                                      : color == 1 ? std::vector<int32_t>{1}
                                                   : std::vector<int32_t>{5};
          int child_rank = -1, child_size = -1;
          chorus_comm_rank(child, &child_rank);
          chorus_comm_size(child, &child_size);
          if (child_size != int(want.size())) return 4;
          if (want[static_cast<std::size_t>(child_rank)] != rank) return 5;
          if (members(child, rank) != want) return 6;
          // Parent and child collectives interleaved, each checked.
          for (int i = 0; i < 20; ++i) {
            int64_t p = rank + i, c = rank * 3 + i;
            if (chorus_allreduce(world, &p, &p, 1, CHORUS_INT64, CHORUS_SUM, 0)) return 7;
            if (p != 15 + 6 * i) return 8;
            if (chorus_allreduce(child, &c, &c, 1, CHORUS_INT64, CHORUS_SUM, 0)) return 9;
            int64_t want_c = 0;
            for (int32_t r : want) want_c += r * 3 + i;
            if (c != want_c) return 10;
            double b = child_rank == 0 ? 1.5 * i : -1;
            if (chorus_broadcast(child, &b, 1, CHORUS_FLOAT64, 0, 0) || b != 1.5 * i) return 11;
          }
          // A split of the split: by child rank parity, keys in order.
          chorus_comm_t grandchild = nullptr;
          if (chorus_comm_split(child, child_rank % 2, child_rank, &grandchild) || !grandchild)
            return 12;
          std::vector<int32_t> want_g;
          for (std::size_t i = static_cast<std::size_t>(child_rank % 2); i < want.size(); i += 2)
            want_g.push_back(want[i]);
          if (members(grandchild, rank) != want_g) return 13;
          if (chorus_barrier(grandchild, 0) || chorus_barrier(world, 0)) return 14;
          if (chorus_comm_destroy(grandchild) || chorus_comm_destroy(child)) return 15;
          return 0;
        },
        transport);
    CHECK(all_zero(results));
  }
}

TEST_CASE("split: a parent destroyed first leaves its children working", "[api][split]") {
  const int n = 4;
  std::vector<chorus_comm_t> children(n, nullptr);
  auto results = run(n, [&](int rank, chorus_comm_t world) {
    return chorus_comm_split(world, rank / 2, rank, &children[static_cast<std::size_t>(rank)]);
  });
  REQUIRE(all_zero(results));  // every parent is destroyed by now
  std::vector<int> after(n, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      chorus_comm_t c = children[static_cast<std::size_t>(r)];
      int32_t x = r;
      int result = chorus_allreduce(c, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, 0) ? 1 : 0;
      if (!result && x != (r / 2) * 4 + 1) result = 2;  // {0,1} -> 1, {2,3} -> 5
      if (chorus_comm_destroy(c)) result = 3;
      after[static_cast<std::size_t>(r)] = result;
    });
  for (auto& t : threads) t.join();
  CHECK(all_zero(after));
}

TEST_CASE("split: a mismatch on a child names both ranks in both numberings", "[api][split]") {
  const int n = 4;
  std::vector<std::string> messages(n);
  auto results = run(n, [&](int rank, chorus_comm_t world) {
    // Child of the odd ranks, reversed: job rank 3 is its rank 0, rank 1 its rank 1.
    chorus_comm_t child = nullptr;
    if (chorus_comm_split(world, rank % 2, -rank, &child) || !child) return 1;
    if (rank % 2 == 0) return chorus_comm_destroy(child) ? 2 : 0;
    std::vector<float> buf(10, 1.0f);
    const std::size_t count = rank == 3 ? 10 : 9;
    chorus_result_t rc =
        chorus_allreduce(child, buf.data(), buf.data(), count, CHORUS_FLOAT32, CHORUS_SUM, 20000);
    const std::string why = chorus_comm_last_error(child);
    messages[static_cast<std::size_t>(rank)] = std::to_string(rc) + ": " + why;
    if (rc != CHORUS_ERR_MISMATCH && rc != CHORUS_ERR_ABORTED) return 3;
    if (rc == CHORUS_ERR_MISMATCH &&
        (why.find("job rank 3 is rank 0") == std::string::npos ||
         why.find("job rank 1 is rank 1") == std::string::npos ||
         why.find("count 10") == std::string::npos || why.find("count 9") == std::string::npos))
      return 4;
    chorus_comm_destroy(child);
    return rc == CHORUS_ERR_MISMATCH ? 0 : 100;  // 100: this rank heard of it from the other
  });
  INFO("rank 1: " << results[1] << " " << messages[1] << "\nrank 3: " << results[3] << " "
                  << messages[3]);
  CHECK(results[0] == 0);
  CHECK(results[2] == 0);
  // At least one of the two ranks detects the mismatch itself; both fail.
  CHECK((results[1] == 0 || results[1] == 100));
  CHECK((results[3] == 0 || results[3] == 100));
  CHECK((results[1] == 0 || results[3] == 0));
}
