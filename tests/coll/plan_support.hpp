// Teams and calls for asking the tuner and the registry what they would
// choose, without running anything.
#pragma once

#include "collectives/call.hpp"
#include "collectives/team.hpp"

namespace chorus::test {

// A team of n ranks for planning (no transport: never run), with a
// shared-memory layout when `shm`.
inline Team plan_team(int n, const shm::Layout* shm = nullptr) {
  Team t;
  for (int i = 0; i < n; ++i) t.members.push_back(i);
  t.shm_layout = shm;
  return t;
}

// A float32 call of `kind` (counts and buffers unset: planning reads none).
inline CollectiveCall call_of(CollectiveKind kind) {
  CollectiveCall c;
  c.kind = kind;
  return c;
}

}  // namespace chorus::test
