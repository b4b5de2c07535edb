// Runs one collective over thread ranks and compares every rank's result with
// the reference of values.hpp. Each returns "" on success, else a description
// of the first failure (for REQUIRE(... == "")). Outputs start with a value
// unlike the expected one in every bit (guarded.hpp), so an element never
// written fails; guard zones around every buffer catch writes outside it.
#pragma once

#include <cstddef>
#include <string>

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
};

std::string describe_case(const Case& c);

std::string check_allreduce(const Case& c);
std::string check_reduce_scatter(const Case& c);
std::string check_allgather(const Case& c);
std::string check_broadcast(const Case& c);
// Random floats (reduction order changes the rounding; c.op sum, avg or
// prod): every rank's result must be bit-identical to rank 0's and within
// rounding of a float64 reference.
std::string check_allreduce_identical(const Case& c);

}  // namespace chorus::test
