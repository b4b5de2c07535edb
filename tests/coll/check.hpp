// Runs one collective over thread ranks and compares every rank's result with
// the reference of values.hpp. Each returns "" on success, else a description
// of the first failure (for REQUIRE(... == "")).
#pragma once

#include <cstddef>
#include <string>

#include "lib/core/dtype.hpp"

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

}  // namespace chorus::test
