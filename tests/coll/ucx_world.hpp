// UCX worlds for the collective sweeps (coll_tests_ucx): like the TCP worlds
// of harness.cpp, one world of thread ranks per rank count, built on first use
// and reused by later runs.
#pragma once

#include <vector>

#include "transports/transport.hpp"

namespace chorus::test {

// The transports of the UCX world of n ranks (connected on first use).
std::vector<Transport*> ucx_world(int n);
// Closes and destroys the world of n ranks (after a failed run: its
// transports are aborted), so that the next run starts afresh.
void drop_ucx_world(int n);

}  // namespace chorus::test
