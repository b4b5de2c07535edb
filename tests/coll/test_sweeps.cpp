// Algorithm sweeps over thread ranks: ranks {1,2,3,4,5,8}, counts {0,1,2,7,
// a prime}, every dtype and op for allreduce, in place and out of place, with
// 64-byte segments (multi-segment pipelines) and the default 1 MiB; a large
// count (1000003) for a subset so the whole run stays short under ASAN.
#include <catch2/catch.hpp>

#include <set>

#include "tests/coll/check.hpp"
#include "tests/coll/values.hpp"

using namespace chorus;
using namespace chorus::test;

TEST_CASE("test data: the ranks' contributions differ at every element", "[data]") {
  // A rank whose contribution is dropped, doubled or replaced by another
  // rank's must change the reference (for sum; prod factors are never 1).
  for (DataType dt : kDtypes) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod}) {
      with_dtype(dt, [&](auto tr) {
        using Tr = decltype(tr);
        std::size_t repeated = 0, unit_factors = 0;
        for (std::size_t i = 0; i < 5000; ++i) {
          std::set<double> seen;
          for (int r = 0; r < kMaxRanks; ++r) {
            const double v = Tr::to(gen<Tr>(r, i, op));
            seen.insert(v);
            if (op == ReduceOp::prod && (v == 1 || v == -1)) ++unit_factors;
          }
          if (op == ReduceOp::sum && seen.size() != kMaxRanks) ++repeated;
        }
        INFO(dtype_name(dt) << " " << op_name(op));
        CHECK(repeated == 0);
        CHECK(unit_factors == 0);
      });
    }
  }
}

TEST_CASE("random floats: every rank ends with the same bits, for every algorithm",
          "[allreduce][identical]") {
  for (int n : kRanks) {
    for (DataType dt : {DataType::f32, DataType::f64, DataType::f16, DataType::bf16}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod}) {
        for (bool rd : {false, true}) {
          // 1031: several chunks and segments (64-byte segments); 100003 with
          // the default segment: the shared-memory pipeline's large path.
          for (std::size_t count : {std::size_t{7}, std::size_t{1031}, std::size_t{100003}}) {
            if (count == 100003 && (dt == DataType::f64 || dt == DataType::bf16)) continue;
            Case c{n, count, dt, op, count == 1031, count == 100003 ? kDefaultSegment : 64, 0, rd};
            INFO(describe_case(c) << (rd ? " recursive doubling" : " ring (or shm)"));
            REQUIRE(check_allreduce_identical(c) == "");
          }
        }
      }
    }
  }
}

TEST_CASE("ring allreduce: every rank count, dtype, op and placement", "[allreduce]") {
  for (int n : kRanks) {
    for (std::size_t count : {0, 1, 2, 7, 131}) {
      for (DataType dt : kDtypes) {
        for (ReduceOp op : kOps) {
          for (bool in_place : {false, true}) {
            for (std::size_t seg : {std::size_t{64}, kDefaultSegment}) {
              Case c{n, count, dt, op, in_place, seg, 0};
              INFO(describe_case(c));
              REQUIRE(check_allreduce(c) == "");
            }
          }
        }
      }
    }
  }
}

TEST_CASE("ring and Rabenseifner allreduce in rounds: every rank count, dtype and op",
          "[allreduce][rounds]") {
  // Rounds of 64 bytes: 131 elements of 4 bytes are 8.2 rounds (the last
  // one short), 1031 of 1 byte are 16.1; below kRingRoundsFrom rounds (7
  // elements, or 131 of 2 bytes at 128-byte rounds) the call runs whole.
  // The ring runs directly (shared memory's own algorithm over shm),
  // Rabenseifner through the registry.
  for (std::string_view algo : {std::string_view{}, std::string_view{"rabenseifner"}}) {
    for (int n : kRanks) {
      for (std::size_t count : {std::size_t{7}, std::size_t{131}, std::size_t{1031}}) {
        for (DataType dt : kDtypes) {
          for (ReduceOp op : kOps) {
            for (std::size_t round : {std::size_t{64}, std::size_t{128}}) {
              Case c{n, count, dt, op, count % 2 == 1 && n % 2 == 0, 16, 0};
              c.ring_round_bytes = round;
              c.algorithm = algo;
              INFO(describe_case(c));
              REQUIRE(check_allreduce(c) == "");
            }
          }
        }
      }
    }
    // Large: rounds of 64 KiB, several segments each.
    for (int n : {2, 3}) {
      Case c{n, kBig, DataType::f32, ReduceOp::avg, n == 2, 16 << 10, 0};
      c.ring_round_bytes = 64 << 10;
      c.algorithm = algo;
      INFO(describe_case(c));
      REQUIRE(check_allreduce(c) == "");
    }
  }
}

TEST_CASE("recursive doubling allreduce: every rank count, dtype, op and placement",
          "[allreduce][recursive_doubling]") {
  for (int n : kRanks) {
    for (std::size_t count : {0, 1, 2, 7, 131, 4099}) {
      for (DataType dt : kDtypes) {
        for (ReduceOp op : kOps) {
          for (bool in_place : {false, true}) {
            Case c{n, count, dt, op, in_place, 64, 0, true};
            INFO(describe_case(c) << " recursive doubling");
            REQUIRE(check_allreduce(c) == "");
          }
        }
      }
    }
  }
}

TEST_CASE("one-element segments and a larger prime",
          "[allreduce][reduce_scatter][allgather][broadcast]") {
  for (int n : kRanks) {
    for (DataType dt : {DataType::f32, DataType::bf16, DataType::i8, DataType::u64}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
        Case small{n, 7, dt, op, n % 2 == 0, 1, 0};  // segment_bytes 1: one element each
        INFO(describe_case(small));
        REQUIRE(check_allreduce(small) == "");
        Case prime{n, 1031, dt, op, n % 2 == 1, 64, 0};
        INFO(describe_case(prime));
        REQUIRE(check_allreduce(prime) == "");
      }
    }
    // Reduce-scatter forwards from its staging ring: many segments per chunk
    // make it reuse staging slots whose forwarding sends are still in flight.
    for (bool in_place : {false, true}) {
      for (std::size_t count : {7, 131}) {
        Case rs{n, count, DataType::f32, ReduceOp::sum, in_place, 1, 0};
        INFO(describe_case(rs));
        REQUIRE(check_reduce_scatter(rs) == "");
        Case ag{n, count, DataType::u8, ReduceOp::sum, in_place, 1, 0};
        INFO(describe_case(ag));
        REQUIRE(check_allgather(ag) == "");
      }
    }
    Case bc{n, 131, DataType::i32, ReduceOp::sum, true, 1, n / 2};
    INFO(describe_case(bc));
    REQUIRE(check_broadcast(bc) == "");
  }
}

// [exhaustive]: the AddressSanitizer suite leaves it out (tests/coll/meson.build);
// the chosen cases below cover every element size at this count there.
TEST_CASE("ring allreduce: count 1000003, every rank count, dtype and op",
          "[allreduce][large][exhaustive]") {
  // Placement and segment size alternate across the sweep so that both
  // placements and multi-segment chunks run for every rank count.
  int i = 0;
  for (int n : kRanks) {
    for (DataType dt : kDtypes) {
      for (ReduceOp op : kOps) {
        ++i;
        Case c{n, kBig, dt, op, i % 2 == 0, i % 3 == 0 ? kDefaultSegment : 64 << 10, 0};
        INFO(describe_case(c));
        REQUIRE(check_allreduce(c) == "");
      }
    }
  }
}

TEST_CASE("ring allreduce: large count, chosen cases", "[allreduce][large]") {
  const Case cases[] = {
      {3, kBig, DataType::f32, ReduceOp::sum, true, kDefaultSegment, 0},
      {8, kBig, DataType::bf16, ReduceOp::avg, false, 64 << 10, 0},
      {5, kBig, DataType::i8, ReduceOp::prod, true, 64 << 10, 0},
      {8, kBig, DataType::f64, ReduceOp::max, true, kDefaultSegment, 0},
      {2, kBig, DataType::u64, ReduceOp::sum, false, 64 << 10, 0},
      {4, kBig, DataType::f16, ReduceOp::min, false, kDefaultSegment, 0},
      // 32 MiB + 4 bytes: the shared-memory path writes it with streaming
      // stores, and in place with ordinary ones.
      {2, (std::size_t{32} << 20) / 4 + 1, DataType::f32, ReduceOp::sum, false, kDefaultSegment, 0},
      {2, (std::size_t{32} << 20) / 4 + 1, DataType::f32, ReduceOp::sum, true, kDefaultSegment, 0},
  };
  for (const Case& c : cases) {
    INFO(describe_case(c));
    REQUIRE(check_allreduce(c) == "");
  }
}

TEST_CASE("ring reduce_scatter: ranks, counts, dtypes, ops, placement", "[reduce_scatter]") {
  for (int n : kRanks) {
    for (std::size_t count : {0, 1, 2, 7, 131}) {
      for (bool in_place : {false, true}) {
        for (std::size_t seg : {std::size_t{64}, kDefaultSegment}) {
          for (DataType dt : kDtypes) {
            Case c{n, count, dt, ReduceOp::sum, in_place, seg, 0};
            INFO(describe_case(c));
            REQUIRE(check_reduce_scatter(c) == "");
          }
          for (DataType dt : {DataType::f32, DataType::i8, DataType::bf16}) {
            for (ReduceOp op : {ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg}) {
              Case c{n, count, dt, op, in_place, seg, 0};
              INFO(describe_case(c));
              REQUIRE(check_reduce_scatter(c) == "");
            }
          }
        }
      }
    }
  }
  Case big{8, kBig / 8, DataType::f32, ReduceOp::sum, false, 64 << 10, 0};
  INFO(describe_case(big));
  REQUIRE(check_reduce_scatter(big) == "");
}

TEST_CASE("ring allgather: ranks, counts, element sizes, placement", "[allgather]") {
  for (int n : kRanks) {
    for (std::size_t count : {0, 1, 2, 7, 131}) {
      for (DataType dt : {DataType::u8, DataType::f16, DataType::f32, DataType::i64}) {
        for (bool in_place : {false, true}) {
          for (std::size_t seg : {std::size_t{64}, kDefaultSegment}) {
            Case c{n, count, dt, ReduceOp::sum, in_place, seg, 0};
            INFO(describe_case(c));
            REQUIRE(check_allgather(c) == "");
          }
        }
      }
    }
  }
  Case big{8, kBig / 8, DataType::f32, ReduceOp::sum, true, 64 << 10, 0};
  INFO(describe_case(big));
  REQUIRE(check_allgather(big) == "");
}

TEST_CASE("ring broadcast: every root", "[broadcast]") {
  for (int n : kRanks) {
    for (int root = 0; root < n; ++root) {
      for (std::size_t count : {0, 1, 7, 1031}) {
        for (DataType dt : {DataType::u8, DataType::f64}) {
          for (std::size_t seg : {std::size_t{64}, kDefaultSegment}) {
            Case c{n, count, dt, ReduceOp::sum, true, seg, root};
            INFO(describe_case(c));
            REQUIRE(check_broadcast(c) == "");
          }
        }
      }
    }
  }
  Case big{8, kBig, DataType::f32, ReduceOp::sum, true, 64 << 10, 3};
  INFO(describe_case(big));
  REQUIRE(check_broadcast(big) == "");
}
