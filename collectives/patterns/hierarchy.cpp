#include "collectives/patterns/hierarchy.hpp"

#include <algorithm>
#include <map>

namespace chorus::patterns {

HostGroups group_by_host(const std::vector<std::string>& host_of_rank) {
  HostGroups g;
  std::map<std::string, int> number;
  const int n = static_cast<int>(host_of_rank.size());
  g.host_of.resize(host_of_rank.size());
  g.local_index.resize(host_of_rank.size());
  for (int r = 0; r < n; ++r) {
    const auto [it, added] = number.emplace(host_of_rank[r], g.host_count());
    if (added) g.hosts.emplace_back();
    auto& ranks = g.hosts[static_cast<std::size_t>(it->second)];
    g.host_of[r] = it->second;
    g.local_index[r] = static_cast<int>(ranks.size());
    ranks.push_back(r);
  }
  return g;
}

int stage_segments(std::size_t bytes, int widest) {
  if (widest < 2) return 1;
  const std::size_t segments = bytes / kStageSegmentBytes;
  return static_cast<int>(std::clamp<std::size_t>(segments, 1, kMaxStageSegments));
}

int HostGroups::lanes() const {
  std::size_t fewest = hosts.empty() ? 0 : hosts.front().size();
  for (const auto& h : hosts) fewest = std::min(fewest, h.size());
  return static_cast<int>(fewest);
}

std::vector<int> HostGroups::lane(int j) const {
  std::vector<int> out;
  for (const auto& h : hosts) out.push_back(h[static_cast<std::size_t>(j)]);
  return out;
}

std::vector<int> HostGroups::host_order() const {
  std::vector<int> out;
  for (const auto& h : hosts) out.insert(out.end(), h.begin(), h.end());
  return out;
}

bool HostGroups::grouped() const {
  const std::vector<int> order = host_order();
  for (std::size_t i = 0; i < order.size(); ++i)
    if (order[i] != static_cast<int>(i)) return false;
  return true;
}

}  // namespace chorus::patterns
