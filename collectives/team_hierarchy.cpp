#include "collectives/team_hierarchy.hpp"

#include <algorithm>

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

}  // namespace

TeamHierarchy::TeamHierarchy(const Team& world, const Team& local,
                             const patterns::HostGroups& groups, uint32_t lane_tag,
                             uint32_t order_tag, const AlgoOverride& user, const CostModel& model) {
  const int me = world.index;
  CHORUS_CHECK(static_cast<int>(groups.host_of.size()) == world.size(),
               "host groups of {} ranks for a team of {}", groups.host_of.size(), world.size());
  const std::vector<int> mine =
      members_at(world, groups.hosts[static_cast<std::size_t>(groups.host_of[me])]);
  CHORUS_CHECK(mine == local.members, "the host team of rank {} has {} ranks where its host has {}",
               me, local.size(), mine.size());
  const int lane = groups.local_index[me];
  if (lane < groups.lanes())
    lane_ =
        Team::of(*world.transport, members_at(world, groups.lane(lane)), lane_tag, nullptr, "lane");
  host_ordered_ = Team::of(*world.transport, members_at(world, groups.host_order()), order_tag,
                           nullptr, "host-ordered");
  lane_shape_.members.resize(static_cast<std::size_t>(groups.host_count()));
  lane_shape_.name = "lane (shape)";
  view_.lane_shape = &lane_shape_;
  for (const auto& host : groups.hosts)
    view_.widest = std::max(view_.widest, static_cast<int>(host.size()));
  view_.local = &local;
  view_.lane = lane_ ? &*lane_ : nullptr;
  view_.host_ordered = &host_ordered_;
  view_.hosts = groups.host_count();
  view_.lanes = groups.lanes();
  view_.grouped = groups.grouped();
  view_.user = &user;
  view_.model = &model;
}

}  // namespace chorus
