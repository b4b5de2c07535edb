// Builds the Hierarchy of a team whose ranks span hosts (team.hpp): the lane
// team and the host-ordered team, next to the host team its owner already
// has. It owns the teams the Hierarchy points to, so it neither moves nor
// copies.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "collectives/patterns/hierarchy.hpp"
#include "collectives/team.hpp"

namespace chorus {

// The placement of a team whose index i is on host host_of_index[i].
Placement placement_of(const std::vector<int>& host_of_index);

struct HierarchyTags {
  uint32_t lane = 0;
  uint32_t host_order = 0;
  uint32_t leaders = 0;
  uint32_t cross = 0;  // Hierarchy::cross_tag
};

class TeamHierarchy {
 public:
  // `groups` groups the indices of `world`; `local` is this rank's host team
  // (its members those of this rank's group, in the same order); `world`
  // and `local` must outlive this. Each team it makes gets its own tag.
  // `host_layout`: the shared-memory layout of the widest host when the
  // ranks of a host share memory (the same on every rank, whatever this
  // rank's host has); null when the stages within hosts run point-to-point.
  TeamHierarchy(const Team& world, const Team& local, patterns::HostGroups groups,
                const HierarchyTags& tags, const AlgoOverride& user, const CostModel& model,
                const shm::Layout* host_layout = nullptr);
  // Makes `world` a team that spans hosts: its placement from `groups`, and
  // its hierarchy the one returned, which the caller keeps for as long as
  // `world` is used (the arguments as for the constructor).
  static std::unique_ptr<TeamHierarchy> attach(Team& world, const Team& local,
                                               patterns::HostGroups groups,
                                               const HierarchyTags& tags, const AlgoOverride& user,
                                               const CostModel& model,
                                               const shm::Layout* host_layout = nullptr);
  ~TeamHierarchy();
  TeamHierarchy(const TeamHierarchy&) = delete;
  TeamHierarchy& operator=(const TeamHierarchy&) = delete;

  const Hierarchy& view() const { return view_; }

 private:
  patterns::HostGroups groups_;
  std::optional<Team> lane_;
  std::optional<Team> leaders_;
  Team host_ordered_;
  Team lane_shape_;
  Team across_shape_;
  Team local_shape_;
  std::unique_ptr<shm::Layout> host_layout_;
  Hierarchy view_;
};

}  // namespace chorus
