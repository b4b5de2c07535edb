// Runs one collective over thread ranks and compares every rank's result with
// the reference of values.hpp. Each returns "" on success, else a description
// of the first failure (for REQUIRE(... == "")). Outputs start with a value
// unlike the expected one in every bit (guarded.hpp), so an element never
// written fails; guard zones around every buffer catch writes outside it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/core/contract.hpp"
#include "base/core/dtype.hpp"

namespace chorus::test {

struct Case {
  int ranks = 1;
  std::size_t count = 0;  // allreduce/broadcast count; per-rank count for the others
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  bool in_place = false;
  std::size_t segment_bytes = 64;
  int root = 0;
  bool recursive_doubling = false;  // allreduce: the small-message algorithm instead of the ring
  // The registered algorithm to run (check_more.cpp's collectives).
  std::string_view algorithm = "";
  // Simulated hosts, a letter per rank (RunOptions::hosts); "": one host.
  std::string_view hosts = "";
  // The ring and Rabenseifner allreduces' rounds (ring_round_bytes); 0: whole.
  std::size_t ring_round_bytes = 0;
};

// What the sweeps range over.
inline constexpr int kRanks[] = {1, 2, 3, 4, 5, 8};
// The algorithms of issue 12 (rabenseifner, double_binary_tree, tree
// broadcast) sweep 7 as well: a non-power-of-two with three extra ranks.
inline constexpr int kRanksWith7[] = {1, 2, 3, 4, 5, 7, 8};
inline constexpr DataType kDtypes[] = {DataType::f32, DataType::f64, DataType::f16, DataType::bf16,
                                       DataType::i8,  DataType::u8,  DataType::i32, DataType::u32,
                                       DataType::i64, DataType::u64};
inline constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                    ReduceOp::avg};
inline constexpr std::size_t kBig = 1000003;
inline constexpr std::size_t kDefaultSegment = 1 << 20;

std::string describe_case(const Case& c);

std::string check_allreduce(const Case& c);
std::string check_reduce_scatter(const Case& c);
std::string check_allgather(const Case& c);
// c.algorithm: the registered broadcast to run; "": shm or the ring.
std::string check_broadcast(const Case& c);
// Random floats (reduction order changes the rounding; c.op sum, avg or
// prod): every rank's result must be bit-identical to rank 0's and within
// rounding of a float64 reference. c.algorithm, when set, names the
// allreduce (else shm, or recursive doubling or the ring as c asks).
std::string check_allreduce_identical(const Case& c);

// The collectives run through the registry (check_more.cpp): c.algorithm
// names the algorithm. v-variants use counts_for(c.ranks, c.count).
std::string check_reduce(const Case& c);
std::string check_gather(const Case& c);
std::string check_scatter(const Case& c);
std::string check_alltoall(const Case& c);
std::string check_allgatherv(const Case& c);
std::string check_reduce_scatterv(const Case& c);

// Per-rank counts of the v-variants' cases: uneven, some zero.
std::vector<std::size_t> counts_for(int ranks, std::size_t base);
// The algorithms of `kind` this test binary's transport can run (shared
// memory ones only in coll_tests_shm).
std::vector<std::string_view> runnable_algorithms(CollectiveKind kind);

}  // namespace chorus::test
