// A team: the ordered group of ranks one algorithm runs over.
//
// Terms:
//   member   a rank as the transport numbers it (the job's rank for the teams
//            of a communicator made by chorus_init; a split communicator's
//            teams use its parent's numbering, as they share its transport);
//   index    a member's position in the team: its rank *in the team*, which
//            is what algorithms compute with (ring neighbours, tree parents);
//   tag      the transport tag all of the team's traffic carries: its own tag
//            space, so teams that share ranks and a transport never match
//            each other's messages;
//   shm      the shared-memory domain of the members when they all share a
//            host and shared memory is allowed (its ranks are the team's
//            indices), else null.
// A communicator owns its world team (every rank), the team of the ranks on
// its host, and the team of the host leaders (the lowest rank of each host),
// the latter only on the leaders themselves; a world that spans hosts also
// has the teams of its Hierarchy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/core/error.hpp"
#include "collectives/tuner/cost_model.hpp"
#include "transports/transport.hpp"

namespace chorus {
namespace shm {
class Domain;
struct Layout;
const Layout& layout_of(const Domain& domain);  // collectives/shm/domain.cpp
}  // namespace shm

namespace patterns {
struct HostGroups;  // patterns/hierarchy.hpp
}
struct Team;
struct AlgoOverride;  // tuner/selection.hpp

// The teams a hierarchical algorithm composes, for a team whose ranks span
// hosts (collectives/team_hierarchy.hpp builds it; patterns/hierarchy.hpp
// defines its terms). The algorithms it runs on them are chosen with the
// communicator's override and cost model.
struct Hierarchy {
  const Team* world = nullptr;                   // the team this is the hierarchy of
  const patterns::HostGroups* groups = nullptr;  // of the world's indices
  const Team* local = nullptr;                   // this rank's host, with its shared-memory domain
  const Team* lane = nullptr;                    // this rank's lane; null when it is in none
  const Team* host_ordered = nullptr;            // every rank, host after host
  const Team* leaders = nullptr;  // local index 0 of every host, in host order; null off them
  uint32_t cross_tag = 0;         // the tag of teams made per call, one rank per host
  // A team of one rank per host, the same on every rank: what estimates of
  // the stage across hosts read (selection must not depend on the rank).
  // Its placement, like the lanes', counts the lanes that share each host's
  // link at once. across_shape: the same team alone on the links (a
  // broadcast or allgather among one rank per host).
  const Team* lane_shape = nullptr;
  const Team* across_shape = nullptr;
  // The widest host's team, the same on every rank: what estimates of the
  // stages within hosts read. It has a shared-memory layout when the hosts'
  // ranks share memory, so the estimate is of what those stages would run.
  const Team* local_shape = nullptr;
  int hosts = 1;
  int lanes = 1;
  int widest = 1;       // the most ranks any host has
  bool grouped = true;  // host order is rank order
  const AlgoOverride* user = nullptr;
  const CostModel* model = nullptr;
};

struct Team {
  Transport* transport = nullptr;
  std::vector<int> members;  // member (transport rank) of each index
  int index = 0;             // this rank's index
  uint32_t tag = 0;
  shm::Domain* shm = nullptr;
  // The layout of the team's shared-memory domain: shm's, or alone for the
  // plan of a team that would have one (chorus-info --plan; never run).
  const shm::Layout* shm_layout = nullptr;
  std::string name = "world";  // for logs and errors ("world", "host", "leaders")
  // Where its members are (link classes, for estimates); the same on every
  // member.
  Placement placement;
  // Set on a team whose ranks span hosts: its sub-teams (hierarchical
  // algorithms refuse a team without one).
  const Hierarchy* hierarchy = nullptr;

  int size() const { return static_cast<int>(members.size()); }
  int rank() const { return index; }
  // The transport rank of index i.
  int member(int i) const { return members[static_cast<std::size_t>(i)]; }
  // The index of transport rank `member`, or -1 when it is not in the team.
  int index_of(int member) const {
    for (std::size_t i = 0; i < members.size(); ++i)
      if (members[i] == member) return static_cast<int>(i);
    return -1;
  }

  // The team of every rank of `transport`, in its order.
  static Team whole(Transport& transport, uint32_t tag, shm::Domain* shm = nullptr) {
    Team t;
    t.transport = &transport;
    t.tag = tag;
    t.shm = shm;
    t.shm_layout = shm ? &shm::layout_of(*shm) : nullptr;
    t.members.resize(static_cast<std::size_t>(transport.size()));
    for (int i = 0; i < transport.size(); ++i) t.members[static_cast<std::size_t>(i)] = i;
    t.index = transport.rank();
    return t;
  }
  // The team of `members` (transport ranks, in team order), which must hold
  // this rank.
  static Team of(Transport& transport, std::vector<int> members, uint32_t tag, shm::Domain* shm,
                 std::string name) {
    Team t;
    t.transport = &transport;
    t.tag = tag;
    t.shm = shm;
    t.shm_layout = shm ? &shm::layout_of(*shm) : nullptr;
    t.members = std::move(members);
    t.name = std::move(name);
    t.index = t.index_of(transport.rank());
    CHORUS_CHECK(t.index >= 0, "rank {} is not a member of team {}", transport.rank(), t.name);
    return t;
  }
};

}  // namespace chorus
