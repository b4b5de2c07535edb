#include "transports/routes.hpp"

#include <fmt/format.h>

#include "base/core/error.hpp"

namespace chorus {

bool ucx_built() {
#ifdef CHORUS_HAVE_UCX
  return true;
#else
  return false;
#endif
}

RoutePlan plan_routes(const topology::HostMap& hosts, const std::string& requested, bool have_ucx) {
  RoutePlan plan;
  const int n = hosts.size();
  const bool one_host = hosts.all_on_one_host();
  if (requested == "ucx" && !have_ucx)
    throw UsageError(CHORUS_ERR_UNSUPPORTED,
                     "CHORUS_TRANSPORT=ucx, but this build has no UCX transport (-Ducx=enabled "
                     "needs Debian's libucx-dev)");
  if (requested == "shm" && !one_host)
    throw UsageError(CHORUS_ERR_UNSUPPORTED,
                     fmt::format("CHORUS_TRANSPORT=shm needs every rank on one host, but the {} "
                                 "ranks run on {} hosts",
                                 n, hosts.host_count()));

  if (requested == "tcp" || requested == "ucx") {
    plan.shm_why = fmt::format("CHORUS_TRANSPORT={}", requested);
  } else if (n == 1) {
    plan.shm_why = "a single rank has no peers";
  } else if (!one_host) {
    plan.shm_why = fmt::format("the {} ranks run on {} hosts", n, hosts.host_count());
  } else {
    plan.shm_collectives = true;
    plan.shm_why = fmt::format("all {} ranks share this host", n);
  }

  plan.shm_allowed = requested == "auto" || requested == "shm";
  plan.host_shm = plan.shm_allowed && hosts.ranks_on_my_host() >= 2;

  // On one host every collective goes through shared memory, so point-to-point
  // traffic is rare there (forced algorithms, the control channel): TCP serves
  // it without the cost of a UCX context per rank.
  // Across hosts UCX earns its context where it reaches RDMA devices at both
  // ends; over plain TCP it was slower than the TCP transport (2 simulated
  // hosts at 1 Gbit/s: 0.105 against 0.119 GB/s for a 64 MiB ring allreduce)
  // and, without its shared-memory transports, brings nothing else.
  const auto ucx_for = [&](int peer) {
    if (requested == "ucx") return true;
    return requested == "auto" && have_ucx && !plan.shm_collectives &&
           !hosts.same_host(hosts.rank, peer) && hosts.rdma_between(hosts.rank, peer);
  };
  // One UCX context serves all peers: with any peer on another host, its
  // shared-memory transports stay off, so that they can never join ranks that
  // only look alike to UCX (network namespaces on one machine).
  plan.ucx_shared_memory = one_host;
  for (int peer = 0; peer < n; ++peer) {
    std::string transport, why;
    const bool same = hosts.same_host(hosts.rank, peer);
    if (peer == hosts.rank) {
      transport = "self";
      why = "this rank";
    } else if (ucx_for(peer)) {
      transport = "ucx";
      plan.uses_ucx = true;
      if (requested == "ucx")
        why = "CHORUS_TRANSPORT=ucx";
      else
        why = "another host, and both hosts have RDMA devices: UCX";
      why += one_host ? "; UCX may use its shared-memory transports"
                      : "; UCX's shared-memory transports off (ranks on several hosts)";
    } else {
      transport = "tcp";
      if (requested == "tcp")
        why = "CHORUS_TRANSPORT=tcp";
      else if (requested == "shm")
        why = "CHORUS_TRANSPORT=shm: point-to-point over TCP";
      else if (plan.shm_collectives)
        why = "same host: collectives through shared memory, the rest over TCP";
      else if (!have_ucx)
        why = "UCX is not in this build";
      else if (same)
        why = "same host: UCX's shared-memory transports are off across hosts, TCP serves";
      else
        why = "another host, without RDMA devices at both ends: TCP (UCX would only use TCP)";
    }
    plan.peer_transport.push_back(transport);
    plan.peer_why.push_back(why);
  }
  return plan;
}

std::vector<std::string> RoutePlan::describe(int rank) const {
  std::vector<std::string> lines;
  lines.push_back(fmt::format("collectives: {} ({})",
                              shm_collectives ? "shared memory" : "point-to-point algorithms",
                              shm_why));
  for (std::size_t peer = 0; peer < peer_transport.size(); ++peer) {
    if (static_cast<int>(peer) == rank) continue;
    lines.push_back(fmt::format("rank {} -> rank {}: {} ({})", rank, peer, peer_transport[peer],
                                peer_why[peer]));
  }
  return lines;
}

}  // namespace chorus
