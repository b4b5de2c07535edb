// Builds the Hierarchy of a team whose ranks span hosts (team.hpp): the lane
// team and the host-ordered team, next to the host team its owner already
// has. It owns the teams the Hierarchy points to, so it neither moves nor
// copies.
#pragma once

#include <cstdint>
#include <optional>

#include "collectives/patterns/hierarchy.hpp"
#include "collectives/team.hpp"

namespace chorus {

class TeamHierarchy {
 public:
  // `groups` groups the indices of `world`; `local` is this rank's host team
  // (its members those of this rank's group, in the same order). The lane and
  // host-ordered teams get their own tags.
  TeamHierarchy(const Team& world, const Team& local, const patterns::HostGroups& groups,
                uint32_t lane_tag, uint32_t order_tag, const AlgoOverride& user,
                const CostModel& model);
  TeamHierarchy(const TeamHierarchy&) = delete;
  TeamHierarchy& operator=(const TeamHierarchy&) = delete;

  const Hierarchy& view() const { return view_; }

 private:
  std::optional<Team> lane_;
  Team host_ordered_;
  Team lane_shape_;
  Hierarchy view_;
};

}  // namespace chorus
