// Pure rank arithmetic of the hierarchical algorithms: which ranks share a
// host, and the teams built from that.
//
// Terms:
//   host         a group of ranks that share memory (topology::HostMap); hosts
//                are numbered in the order of their lowest rank
//   local index  a rank's position among its host's ranks, in rank order
//   lanes        the fewest ranks any host has; lane j is the team of the
//                ranks with local index j, one per host, in host order. A rank
//                whose local index is >= lanes (its host has more ranks than
//                the smallest) is in no lane
//   host order   every rank, host after host, each host's ranks in rank
//                order: a ring in this order crosses each host boundary once
#pragma once

#include <string>
#include <vector>

namespace chorus::patterns {

struct HostGroups {
  std::vector<std::vector<int>> hosts;  // the ranks of each host, ascending
  std::vector<int> host_of;             // host number of each rank
  std::vector<int> local_index;         // local index of each rank

  int host_count() const { return static_cast<int>(hosts.size()); }
  int lanes() const;
  // The ranks of lane j (0 <= j < lanes()), in host order.
  std::vector<int> lane(int j) const;
  // Every rank, host after host.
  std::vector<int> host_order() const;
  // Whether host order is rank order (each host's ranks are consecutive).
  bool grouped() const;
};

// Groups ranks by the host name of each (equal names: the same host).
HostGroups group_by_host(const std::vector<std::string>& host_of_rank);

}  // namespace chorus::patterns
