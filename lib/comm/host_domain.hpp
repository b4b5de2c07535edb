// The shared-memory domain of the ranks of a communicator that share this
// rank's host: set up at init and at every split (collective over those
// ranks; the segment's name meets in the store under key_prefix).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/bootstrap/store.hpp"
#include "base/core/config.hpp"
#include "base/topology/host.hpp"
#include "collectives/shm/domain.hpp"

namespace chorus {

// The layout of a domain of `ranks` ranks on a host with `cores` CPUs for them.
shm::Layout host_shm_layout(const Config& config, int ranks, int cores);

// Null when the host's ranks could not set up a segment (they agree on it).
// `hosts`: the communicator's host map (its rank order, hosts.rank = mine);
// the domain's ranks are the host's ranks in that order.
// `members`: the job rank of each rank of the communicator (errors name those).
std::unique_ptr<shm::Domain> join_host_domain(Store& store, const Config& config,
                                              const topology::HostMap& hosts,
                                              const std::vector<int>& members, int cpus_on_host,
                                              const std::string& job_token,
                                              const std::string& key_prefix,
                                              const Deadline& deadline);

}  // namespace chorus
