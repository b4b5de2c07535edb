// The mirrored strategy: synchronous data parallelism, as TensorFlow's
// MirroredStrategy / MultiWorkerMirroredStrategy do it. Every rank holds a
// replica of every variable and trains it on its own slice of the batch; a
// step's gradients are averaged over the ranks and every rank applies the
// same update, so the replicas stay identical.
//
//   add_variable(name, data, gradient, count, dtype)   in the same order on every rank
//   broadcast_variables()                  the root's values everywhere (collective)
//   per step:
//     gradient_ready(name)                 during the backward pass, in any order
//     reduce_gradients()                   every gradient the mean over ranks
//     apply(optimizer)                     the same update on every rank
//     end_step()                           counts; the replica check every K steps
//
// Reduction. With use_fusion (the default) gradient_ready hands the gradient
// to the communicator's fusion engine at once (lib/fusion/engine.hpp; an
// AVG allreduce in place, under the name "mirrored/<name>"), so reduction
// overlaps the rest of the backward pass and ranks may call it in different
// orders; reduce_gradients hands over the rest and waits for all. Without
// fusion gradient_ready only records readiness, and reduce_gradients starts
// one non-blocking allreduce per gradient on the communicator itself, in
// registration order (which every rank shares, so the calls pair up even if
// the user's own collectives interleave), then waits for all.
//
// The replica check (check_replicas): an xxHash64 digest of every variable's
// bytes, and one of the registration itself, allgathered in one call; if
// any rank differs from rank 0 every rank fails with CHORUS_ERR_MISMATCH
// naming the first variable (registration order) and the lowest rank that
// differs (replica_check.hpp). The communicator stays usable:
// broadcast_variables restores the replicas.
//
// Registration must happen in the same order, with the same names, counts
// and dtypes, on every rank: collectives pair variables by position (a
// difference in counts or dtypes fails as a mismatch of the call; one in
// names or order is what the check's layout digest reports).
//
// Calls are serialised by a mutex (gradient_ready may come from backward
// hooks on other threads). The communicator and the engine slot must
// outlive the strategy; the variables' and gradients' memory too, until
// every reduction handed over has finished (reduce_gradients, or drain).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/core/deadline.hpp"
#include "lib/comm/communicator.hpp"
#include "lib/fusion/engine_slot.hpp"
#include "lib/strategy/optimizer.hpp"

namespace chorus::strategy {

struct MirroredOptions {
  int root = 0;            // broadcast_variables' source
  bool use_fusion = true;  // reduce through the fusion engine (else grouped allreduces)
  int check_every = 0;     // end_step runs check_replicas every this many steps; 0: never
};

class Mirrored {
 public:
  // Throws UsageError for a root outside the communicator or a negative
  // check_every.
  Mirrored(Communicator& comm, fusion::EngineSlot& fusion, MirroredOptions options);
  ~Mirrored();
  Mirrored(const Mirrored&) = delete;
  Mirrored& operator=(const Mirrored&) = delete;

  // Registers a variable of `count` elements of `dtype` at `data`, and its
  // gradient at `gradient` (same count and dtype; null: not trained, only
  // broadcast and checked). Local. Throws UsageError for an empty or taken
  // name, null data, a count of 0, a gradient at the variable's own address.
  void add_variable(std::string name, void* data, void* gradient, std::size_t count,
                    DataType dtype);
  // Every variable from the root to every rank, in registration order
  // (collective). Also starts the fusion engine (use_fusion), so that the
  // first gradient_ready need not come at the same place among the
  // communicator's calls on every rank.
  void broadcast_variables(const Deadline& deadline);
  // The gradient of `name` is computed: reduce it now (fusion) or at
  // reduce_gradients. Throws UsageError for an unknown name, a variable
  // without a gradient, or a gradient already handed over this step (a
  // step ends at apply or end_step).
  void gradient_ready(std::string_view name);
  // Hands over every gradient not yet handed over this step and waits until
  // each holds the mean over ranks (a gradient already reduced this step is
  // left as it is). A timeout leaves the reductions running (a later call
  // waits again); any other failure is every rank's.
  void reduce_gradients(const Deadline& deadline);
  // One optimizer update of every variable that has a gradient. Every such
  // gradient must be float32 or float64 (else UsageError) and reduced this
  // step (else UsageError CHORUS_ERR_INVALID_USAGE); nothing is updated when
  // either check fails. Ends the step's reduction. The optimizer kind is
  // fixed by the first apply; the other options may change (schedules).
  void apply(const OptimizerOptions& options);
  // Ends a step: counts it, makes every reduced gradient ready for the next
  // step (also for a program that applies its own optimizer) and every
  // check_every steps runs check_replicas.
  void end_step(const Deadline& deadline);
  // Collective: throws IoError(CHORUS_ERR_MISMATCH) on every rank if any
  // replica differs from rank 0's.
  void check_replicas(const Deadline& deadline);
  // Waits (until the deadline) for the reductions handed over, ignoring
  // their errors: afterwards nothing writes the gradients any more.
  void drain(const Deadline& deadline) noexcept;

  uint64_t steps() const;
  const MirroredOptions& options() const { return options_; }

 private:
  enum class Reduction : uint8_t { idle, ready, in_flight, reduced };
  struct Variable {
    std::string name;
    void* data = nullptr;
    void* gradient = nullptr;
    std::size_t count = 0;
    DataType dtype = DataType::f32;
    Reduction reduction = Reduction::idle;
    fusion::FusedPtr fused;  // use_fusion: the engine's request
    WorkPtr work;            // otherwise: the allreduce's
    std::optional<OptimizerState> optimizer;
    std::size_t bytes() const { return count * dtype_size(dtype); }
  };

  Variable& find_locked(std::string_view name, const char* call);
  fusion::Engine& engine_locked();
  void submit_locked(Variable& v);
  // Waits for v's reduction; resets it to idle and rethrows if it failed.
  void wait_locked(Variable& v, const Deadline& deadline);
  void check_replicas_locked(const Deadline& deadline);

  Communicator& comm_;
  fusion::EngineSlot& fusion_;
  const MirroredOptions options_;
  const Spin spin_;
  mutable std::mutex mu_;
  std::vector<Variable> variables_;  // registration order
  std::unordered_map<std::string, std::size_t> index_;
  std::optional<OptimizerKind> optimizer_kind_;  // fixed by the first apply
  uint64_t steps_ = 0;
};

}  // namespace chorus::strategy
