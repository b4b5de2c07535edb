// The replica check's pure half: digests of variables and the verdict from
// every rank's digests, which lib/strategy/mirrored.cpp gathers in one
// allgather. The verdict is a function of the gathered digests alone, which
// every rank holds alike, so every rank reaches the same one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/core/dtype.hpp"

namespace chorus::strategy {

// What a rank's registration looks like to the check: the names, counts and
// dtypes in registration order.
struct VariableLayout {
  std::string_view name;
  std::size_t count;
  DataType dtype;
};

// xxHash64 of a variable's bytes.
uint64_t digest_bytes(const void* data, std::size_t bytes);
// One digest of the whole registration (names, counts, dtypes, order): ranks
// that registered differently must not compare variables by position.
uint64_t digest_layout(std::span<const VariableLayout> variables);

// Where the replicas first differ from rank 0's.
struct Divergence {
  // -1: the registrations differ (the layout digest); else the variable's
  // index in registration order.
  int64_t variable = -1;
  int rank = 0;            // the lowest rank that differs there
  uint64_t theirs = 0;     // that rank's digest
  uint64_t reference = 0;  // rank 0's
};

// gathered: `ranks` blocks of (1 + variables) digests, rank by rank, each the
// layout digest and then one per variable. The first variable (registration
// order) on which some rank differs from rank 0, with the lowest such rank;
// a layout difference comes first. nullopt: every replica agrees.
std::optional<Divergence> first_divergence(std::span<const uint64_t> gathered, int ranks);

// "replicas diverged at step 12: variable 'fc1.weight' on rank 2 differs from
// rank 0 (digest 0x... vs 0x...)"; names: the variables in registration order.
std::string describe_divergence(const Divergence& divergence, std::span<const std::string> names,
                                uint64_t step);

}  // namespace chorus::strategy
