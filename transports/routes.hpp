// Which transport carries each peer's traffic, and why: the design's
// preference list applied to the topology's host identities.
//
//   every rank on one host: shared-memory collectives; point-to-point (rare
//                   then: forced algorithms) over TCP;
//   several hosts:  UCX where built (without its shared-memory transports,
//                   which cannot tell network namespaces apart), else TCP.
//
// CHORUS_TRANSPORT forces one: tcp (everything over TCP, no shared memory),
// ucx (point-to-point over UCX, no shared-memory collectives), shm
// (shared-memory collectives, which need every rank on one host; TCP for the
// rest). TCP is always connected as well: it is the control channel that
// reports a dead peer to every wait, whichever transport carries the data.
#pragma once

#include <string>
#include <vector>

#include "base/topology/host.hpp"

namespace chorus {

struct RoutePlan {
  bool shm_collectives = false;  // every rank here: the world team has a shared-memory domain
  std::string shm_why;
  // This host's ranks get a shared-memory domain (the host team's) even when
  // the job spans hosts: two or more of them, and shared memory allowed.
  bool host_shm = false;
  // Ranks that share a host may use shared memory (CHORUS_TRANSPORT auto or
  // shm): the same on every rank, whatever its own host holds.
  bool shm_allowed = false;
  std::vector<std::string> peer_transport;  // "tcp" or "ucx"; "self" for this rank
  std::vector<std::string> peer_why;
  bool uses_ucx = false;
  bool ucx_shared_memory = false;  // UCX may use its shared-memory transports

  // One line per peer: "rank 0 -> rank 3: ucx (same host: ...)".
  std::vector<std::string> describe(int rank) const;
};

// Throws UsageError(CHORUS_ERR_UNSUPPORTED) when the request cannot be met
// (ucx without UCX in the build; shm with ranks on several hosts).
RoutePlan plan_routes(const topology::HostMap& hosts, const std::string& requested, bool ucx_built);

// Whether this build has the UCX transport.
bool ucx_built();

}  // namespace chorus
