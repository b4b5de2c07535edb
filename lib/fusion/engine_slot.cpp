#include "lib/fusion/engine_slot.hpp"

#include "base/core/error.hpp"

namespace chorus::fusion {

Engine& EngineSlot::engine(Communicator& comm) {
  if (Engine* made = made_.load(std::memory_order_acquire)) return *made;
  std::lock_guard lock(mu_);
  if (!engine_) {
    auto make_comm = comm.start_split(0, comm.rank());
    engine_ = std::make_unique<Engine>(std::move(make_comm), comm.rank(), comm.size(),
                                       options_ ? *options_ : EngineOptions::from(comm.config()));
    made_.store(engine_.get(), std::memory_order_release);
  }
  return *engine_;
}

void EngineSlot::configure(const EngineOptions& options) {
  std::lock_guard lock(mu_);
  if (engine_)
    throw UsageError(CHORUS_ERR_INVALID_USAGE,
                     "chorus_fusion_configure: the engine already runs (configure before the "
                     "first fused call)");
  options_ = options;
}

EngineStats EngineSlot::stats() const {
  std::lock_guard lock(mu_);
  return engine_ ? engine_->stats() : EngineStats{};
}

void EngineSlot::shutdown() {
  std::lock_guard lock(mu_);
  if (engine_) engine_->shutdown();
}

}  // namespace chorus::fusion
