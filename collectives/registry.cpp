#include "collectives/registry.hpp"

#include <array>
#include <vector>

#include "collectives/call.hpp"
#include "collectives/team.hpp"

// Every algorithm, in registry order (see registry.hpp: append only).
#define CHORUS_ALGORITHMS(X)      \
  X(ring_allreduce)               \
  X(recursive_doubling_allreduce) \
  X(shm_allreduce)                \
  X(ring_broadcast)               \
  X(shm_broadcast)                \
  X(ring_allgather)               \
  X(shm_allgather)                \
  X(ring_reduce_scatter)          \
  X(shm_reduce_scatter)           \
  X(dissemination_barrier)        \
  X(shm_barrier)                  \
  X(tree_reduce)                  \
  X(ring_reduce)                  \
  X(shm_reduce)                   \
  X(linear_gather)                \
  X(shm_gather)                   \
  X(linear_scatter)               \
  X(shm_scatter)                  \
  X(pairwise_alltoall)            \
  X(shm_alltoall)                 \
  X(ring_allgatherv)              \
  X(shm_allgatherv)               \
  X(ring_reduce_scatterv)         \
  X(shm_reduce_scatterv)          \
  X(hierarchical_allreduce)       \
  X(ring_by_host_allreduce)       \
  X(hierarchical_broadcast)       \
  X(hierarchical_allgather)       \
  X(rabenseifner_allreduce)       \
  X(tree_broadcast)               \
  X(double_binary_tree_allreduce)

namespace chorus {

#define CHORUS_DECLARE_ALGORITHM(name) extern const AlgorithmSpec name##_spec;
CHORUS_ALGORITHMS(CHORUS_DECLARE_ALGORITHM)
#undef CHORUS_DECLARE_ALGORITHM

namespace {

const AlgorithmSpec* const kAll[] = {
#define CHORUS_LIST_ALGORITHM(name) &name##_spec,
    CHORUS_ALGORITHMS(CHORUS_LIST_ALGORITHM)
#undef CHORUS_LIST_ALGORITHM
};
static_assert(std::size(kAll) < 255, "CallSignature::algo is one byte");

std::string_view name_of(uint8_t id) {
  const AlgorithmSpec* spec = algorithm_by_id(id);
  return spec ? spec->name : std::string_view("unknown");
}

struct ByKind {
  std::array<std::vector<const AlgorithmSpec*>, kCollectiveKinds> lists;
  ByKind() {
    for (const AlgorithmSpec* spec : kAll)
      lists[static_cast<std::size_t>(spec->kind)].push_back(spec);
    set_algorithm_namer(&name_of);  // describe() names algorithms from now on
  }
};

const ByKind& by_kind() {
  static const ByKind lists;
  return lists;
}

}  // namespace

std::span<const AlgorithmSpec* const> algorithms() {
  by_kind();  // installs the namer
  return kAll;
}

std::span<const AlgorithmSpec* const> algorithms_for(CollectiveKind kind) {
  const auto& list = by_kind().lists[static_cast<std::size_t>(kind)];
  return {list.data(), list.size()};
}

const AlgorithmSpec* find_algorithm(CollectiveKind kind, std::string_view name) {
  for (const AlgorithmSpec* spec : algorithms_for(kind))
    if (spec->name == name) return spec;
  return nullptr;
}

uint8_t algorithm_id(const AlgorithmSpec& spec) {
  for (std::size_t i = 0; i < std::size(kAll); ++i)
    if (kAll[i] == &spec) return static_cast<uint8_t>(i + 1);
  return 0;
}

const AlgorithmSpec* algorithm_by_id(uint8_t id) {
  return id >= 1 && id <= std::size(kAll) ? kAll[id - 1] : nullptr;
}

const char* needs_shared_memory(const Team& team, const CollectiveCall&) {
  return team.shm_layout ? nullptr
                         : "no shared-memory domain: the team's ranks do not all share a host, or "
                           "CHORUS_TRANSPORT excludes shared memory";
}

const char* runs_anywhere(const Team&, const CollectiveCall&) {
  return nullptr;
}

}  // namespace chorus
