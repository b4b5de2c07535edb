// The UCX transport of one thread rank for the collective sweeps
// (coll_tests_ucx); harness.cpp builds and caches the worlds.
#pragma once

#include <memory>

#include "base/bootstrap/store.hpp"
#include "transports/transport.hpp"

namespace chorus::test {

std::unique_ptr<Transport> connect_ucx(Store& store, int rank, int size);

}  // namespace chorus::test
