// chorus-info --topology (info_topology.cpp).
#pragma once

#include "base/core/config.hpp"

namespace chorus::info {

// This host; under a launcher, the job's hosts and links (starts a
// communicator, so the link probe runs). Throws chorus::Error.
void print_topology(const Config& config);

}  // namespace chorus::info
