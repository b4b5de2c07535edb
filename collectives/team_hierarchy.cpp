#include "collectives/team_hierarchy.hpp"

#include <algorithm>
#include <map>

#include "base/core/error.hpp"
#include "collectives/shm/domain.hpp"  // Team::of reads the layout

namespace chorus {
namespace {

std::vector<int> members_at(const Team& team, const std::vector<int>& indices) {
  std::vector<int> out;
  out.reserve(indices.size());
  for (int i : indices) out.push_back(team.member(i));
  return out;
}

// The host of each of `indices` (indices of the world).
std::vector<int> hosts_at(const patterns::HostGroups& g, const std::vector<int>& indices) {
  std::vector<int> out;
  out.reserve(indices.size());
  for (int i : indices) out.push_back(g.host_of[static_cast<std::size_t>(i)]);
  return out;
}

// The placement of `teams` teams like p that run at once, each with its
// members on distinct hosts of the others': their flows share the links.
Placement at_once(Placement p, int teams) {
  p.ring_crossings *= teams;
  p.host_load *= teams;
  return p;
}

}  // namespace

Placement placement_of(const std::vector<int>& host_of_index) {
  Placement p;
  const std::size_t n = host_of_index.size();
  std::map<int, int> leaving, members;
  for (std::size_t i = 0; i < n; ++i) {
    const int host = host_of_index[i];
    p.host_load = std::max(p.host_load, ++members[host]);
    if (host != host_of_index[(i + 1) % n]) {
      p.ring_crossings = std::max(p.ring_crossings, ++leaving[host]);
      ++p.ring_edges_across;
    }
  }
  if (!p.spans_hosts()) return p;
  for (std::size_t distance = 1; distance < n; distance *= 2, ++p.local_rounds)
    for (std::size_t i = 0; i < n; ++i)
      if ((i ^ distance) < n && host_of_index[i] != host_of_index[i ^ distance]) return p;
  return p;
}

TeamHierarchy::TeamHierarchy(const Team& world, const Team& local, patterns::HostGroups groups,
                             const HierarchyTags& tags, const AlgoOverride& user,
                             const CostModel& model, const shm::Layout* host_layout)
    : groups_(std::move(groups)),
      host_layout_(host_layout ? std::make_unique<shm::Layout>(*host_layout) : nullptr) {
  const int me = world.index;
  CHORUS_CHECK(static_cast<int>(groups_.host_of.size()) == world.size(),
               "host groups of {} ranks for a team of {}", groups_.host_of.size(), world.size());
  const std::vector<int> mine =
      members_at(world, groups_.hosts[static_cast<std::size_t>(groups_.host_of[me])]);
  CHORUS_CHECK(mine == local.members, "the host team of rank {} has {} ranks where its host has {}",
               me, local.size(), mine.size());
  const int lane = groups_.local_index[me];
  if (lane < groups_.lanes())
    lane_ = Team::of(*world.transport, members_at(world, groups_.lane(lane)), tags.lane, nullptr,
                     "lane");
  if (lane == 0)
    leaders_ = Team::of(*world.transport, members_at(world, groups_.lane(0)), tags.leaders, nullptr,
                        "leaders");
  host_ordered_ = Team::of(*world.transport, members_at(world, groups_.host_order()),
                           tags.host_order, nullptr, "host-ordered");
  // The lanes run at once, so each host's link carries every lane's traffic.
  const Placement one_per_host = placement_of(hosts_at(groups_, groups_.lane(0)));
  const Placement lanes_at_once = at_once(one_per_host, groups_.lanes());
  if (lane_) lane_->placement = lanes_at_once;
  if (leaders_) leaders_->placement = one_per_host;
  host_ordered_.placement = placement_of(hosts_at(groups_, groups_.host_order()));
  lane_shape_.members.resize(static_cast<std::size_t>(groups_.host_count()));
  lane_shape_.placement = lanes_at_once;
  lane_shape_.name = "lane (shape)";
  across_shape_.members = lane_shape_.members;
  across_shape_.name = "one per host (shape)";
  across_shape_.placement = one_per_host;
  view_.across_shape = &across_shape_;
  view_.world = &world;
  view_.groups = &groups_;
  view_.lane_shape = &lane_shape_;
  for (const auto& host : groups_.hosts)
    view_.widest = std::max(view_.widest, static_cast<int>(host.size()));
  local_shape_.members.resize(static_cast<std::size_t>(view_.widest));
  local_shape_.name = "widest host (shape)";
  local_shape_.shm_layout = host_layout_.get();
  view_.local_shape = &local_shape_;
  view_.local = &local;
  view_.lane = lane_ ? &*lane_ : nullptr;
  view_.leaders = leaders_ ? &*leaders_ : nullptr;
  view_.host_ordered = &host_ordered_;
  view_.cross_tag = tags.cross;
  view_.hosts = groups_.host_count();
  view_.lanes = groups_.lanes();
  view_.grouped = groups_.grouped();
  view_.user = &user;
  view_.model = &model;
}

std::unique_ptr<TeamHierarchy> TeamHierarchy::attach(
    Team& world, const Team& local, patterns::HostGroups groups, const HierarchyTags& tags,
    const AlgoOverride& user, const CostModel& model, const shm::Layout* host_layout) {
  world.placement = placement_of(groups.host_of);
  auto hierarchy = std::make_unique<TeamHierarchy>(world, local, std::move(groups), tags, user,
                                                   model, host_layout);
  world.hierarchy = &hierarchy->view();
  return hierarchy;
}

TeamHierarchy::~TeamHierarchy() = default;

}  // namespace chorus
