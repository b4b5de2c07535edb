// Which parameter server holds which variable. Variables are placed whole
// (a server applies the optimizer to a variable in one piece), largest
// first, each on the server that holds the fewest bytes so far (ties: the
// lowest index): the greedy longest-processing-time rule, which keeps the
// largest server within 4/3 of the best balance. TensorFlow's
// ParameterServerStrategy places round-robin by default, which puts two
// large variables on one server as easily as on two.
#pragma once

#include <cstddef>
#include <vector>

namespace chorus::strategy::ps {

// shard_of[v] for every variable v with bytes[v]; servers > 0. Equal inputs
// give equal outputs on every rank (no ordering depends on addresses).
std::vector<int> assign_shards(const std::vector<std::size_t>& bytes, int servers);

}  // namespace chorus::strategy::ps
