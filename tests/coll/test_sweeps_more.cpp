// Sweeps of the collectives that run through the registry, for every
// algorithm this binary's transport can run: ranks {1,2,3,4,5,8}, counts
// {0,1,7} with every root, both placements, and dtypes and ops rotating
// through all combinations; 64-byte segments (many pipeline segments) and
// the default; a count of 1000003 for each rank count and algorithm.
#include <catch2/catch.hpp>

#include "tests/coll/check.hpp"

using namespace chorus;
using namespace chorus::test;

namespace {

// The k-th (dtype, op) combination: consecutive cases cover all 50.
std::pair<DataType, ReduceOp> combo(int k) {
  return {kDtypes[k % 10], kOps[(k / 10 + k) % 5]};
}

using Check = std::string (*)(const Case&);

// Every algorithm of `kind`, every rank count, root, small count, placement
// and segment size; dtypes and ops rotate. Then the large count.
void sweep(CollectiveKind kind, Check check, bool rooted, bool has_in_place = true) {
  int k = 0;
  for (std::string_view algo : runnable_algorithms(kind)) {
    for (int n : kRanks) {
      for (int root = 0; root < (rooted ? n : 1); ++root) {
        for (std::size_t count : {0, 1, 7}) {
          for (bool in_place : {false, true}) {
            if (in_place && !has_in_place) continue;
            for (std::size_t seg : {std::size_t{64}, std::size_t{1} << 20}) {
              auto [dt, op] = combo(k++);
              Case c{n, count, dt, op, in_place, seg, root, false, algo};
              INFO(collective_name(kind) << ": " << describe_case(c));
              REQUIRE(check(c) == "");
            }
          }
        }
      }
      auto [dt, op] = combo(k++);
      Case big{n,
               n >= 5 ? kBig / 4 : kBig,
               dt,
               op,
               k % 2 == 0,
               k % 3 == 0 ? std::size_t{64} << 10 : std::size_t{1} << 20,
               rooted ? n - 1 : 0,
               false,
               algo};
      INFO(collective_name(kind) << ": " << describe_case(big));
      REQUIRE(check(big) == "");
    }
  }
}

}  // namespace

TEST_CASE("reduce: every algorithm, rank count, root, dtype and op", "[reduce]") {
  sweep(CollectiveKind::reduce, check_reduce, true);
  // Every dtype and op for one shape per algorithm, with a prime count.
  for (std::string_view algo : runnable_algorithms(CollectiveKind::reduce))
    for (DataType dt : kDtypes)
      for (ReduceOp op : kOps) {
        Case c{5, 131, dt, op, false, 64, 3, false, algo};
        INFO(describe_case(c));
        REQUIRE(check_reduce(c) == "");
      }
}

TEST_CASE("gather: every algorithm, rank count and root", "[gather]") {
  sweep(CollectiveKind::gather, check_gather, true);
}

TEST_CASE("scatter: every algorithm, rank count and root", "[scatter]") {
  sweep(CollectiveKind::scatter, check_scatter, true);
}

TEST_CASE("alltoall: every algorithm and rank count", "[alltoall]") {
  sweep(CollectiveKind::alltoall, check_alltoall, false, false);
}

TEST_CASE("allgatherv: uneven and empty blocks, every algorithm and rank count", "[allgatherv]") {
  sweep(CollectiveKind::allgatherv, check_allgatherv, false);
}

TEST_CASE("reduce_scatterv: uneven and empty blocks, every algorithm, dtype and op",
          "[reduce_scatterv]") {
  sweep(CollectiveKind::reduce_scatterv, check_reduce_scatterv, false);
  for (std::string_view algo : runnable_algorithms(CollectiveKind::reduce_scatterv))
    for (DataType dt : kDtypes)
      for (ReduceOp op : kOps) {
        Case c{4, 131, dt, op, true, 64, 0, false, algo};
        INFO(describe_case(c));
        REQUIRE(check_reduce_scatterv(c) == "");
      }
}

// The algorithms of issue 12, forced by name: ranks {1,2,3,4,5,7,8}.
namespace {

// Every dtype and op, both placements, counts 0, 1 and 7, 64-byte segments
// (one-element ones for 7 in place); a prime, 1031 (chunks of different
// sizes, many segments), for every dtype with the ops rotating. Then 1000003
// once per rank count, dtype and op rotating, placement and segment size
// alternating; and random floats that must end with the same bits on every
// rank.
void sweep_allreduce(std::string_view algo) {
  for (int n : kRanksWith7) {
    for (std::size_t count : {0, 1, 7, 1031}) {
      for (int d = 0; d < 10; ++d) {
        for (int o = 0; o < 5; ++o) {
          if (count == 1031 && (d + o) % 5 != n % 5) continue;  // one op per dtype
          const DataType dt = kDtypes[d];
          const ReduceOp op = kOps[o];
          for (bool in_place : {false, true}) {
            const std::size_t seg = count == 7 && in_place ? 1 : 64;
            Case c{n, count, dt, op, in_place, seg, 0, false, algo};
            INFO(describe_case(c));
            REQUIRE(check_allreduce(c) == "");
          }
        }
      }
    }
  }
  int k = 0;
  for (int n : kRanksWith7) {
    auto [dt, op] = combo(k++ * 11);  // dtypes 0..6, every op
    Case big{n, kBig, dt, op, n % 2 == 0, n % 3 == 0 ? kDefaultSegment : 64 << 10, 0, false, algo};
    INFO(describe_case(big));
    REQUIRE(check_allreduce(big) == "");
  }
  for (int n : kRanksWith7)
    for (DataType dt : {DataType::f32, DataType::f16, DataType::bf16, DataType::f64})
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod}) {
        Case c{n, 1031, dt, op, n % 2 == 1, 64, 0, false, algo};
        INFO(describe_case(c) << " (random floats)");
        REQUIRE(check_allreduce_identical(c) == "");
      }
}

}  // namespace

TEST_CASE("rabenseifner allreduce: every rank count, dtype, op and placement",
          "[allreduce][rabenseifner]") {
  sweep_allreduce("rabenseifner");
}

TEST_CASE("tree broadcast: every rank count, root, dtype and count", "[broadcast][tree]") {
  // Broadcast is in place (recv on every rank); segments of one element, 64
  // bytes and the default.
  for (int n : kRanksWith7) {
    for (int root = 0; root < n; ++root) {
      for (std::size_t count : {0, 1, 7, 1031}) {
        for (DataType dt : kDtypes) {
          for (std::size_t seg : {std::size_t{1}, std::size_t{64}, kDefaultSegment}) {
            if (seg == 1 && count > 7) continue;
            Case c{n, count, dt, ReduceOp::sum, true, seg, root, false, "tree"};
            INFO(describe_case(c));
            REQUIRE(check_broadcast(c) == "");
          }
        }
      }
    }
    Case big{n,     kBig,  kDtypes[n % 10], ReduceOp::sum, true, n % 2 ? kDefaultSegment : 64 << 10,
             n - 1, false, "tree"};
    INFO(describe_case(big));
    REQUIRE(check_broadcast(big) == "");
  }
}

TEST_CASE("double binary tree allreduce: every rank count, dtype, op and placement",
          "[allreduce][double_binary_tree]") {
  sweep_allreduce("double_binary_tree");
}
