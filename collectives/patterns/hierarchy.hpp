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

#include <cstddef>
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

// Segments of a hierarchical allreduce of `bytes` whose widest host has
// `widest` ranks: the stages within a host work on one segment while the
// stage across hosts works on the one before, so only the first segment's
// reduce-scatter and the last one's allgather are not hidden behind the
// network. One segment per kStageSegmentBytes, at most kMaxStageSegments
// (each costs the network stage's latency once more; on 2 simulated hosts x
// 2 ranks, 64 MiB reached 0.141 / 0.165 / 0.171 / 0.173 GB/s busbw with at
// most 1 / 8 / 16 / 32 segments at 1 Gbit/s, and 0.50 / 0.52 / 0.55 / 0.57
// at 10 Gbit/s); one when no host has two ranks (nothing to overlap).
inline constexpr std::size_t kStageSegmentBytes = 1 << 20;
inline constexpr int kMaxStageSegments = 32;
int stage_segments(std::size_t bytes, int widest);

}  // namespace chorus::patterns
