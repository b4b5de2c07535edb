// Where a communicator keeps its fusion engine: made on first use, in the
// communicator's call order, with the settings given before that. The C API
// handle holds one (lib/api/handles.hpp); so can any layer between the
// fusion engine and the C API that submits fused tensors (lib/strategy),
// which is why it lives here and not in lib/api.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include "lib/comm/communicator.hpp"
#include "lib/fusion/engine.hpp"

namespace chorus::fusion {

class EngineSlot {
 public:
  EngineSlot() = default;
  EngineSlot(const EngineSlot&) = delete;
  EngineSlot& operator=(const EngineSlot&) = delete;

  // The engine of `comm`, made by the first call: its communicator is split
  // off from `comm` here, in comm's call order (as a split would be), and
  // finished on the engine's thread, so this does not wait for the peers.
  // Every rank's first call must come at the same place among its
  // collectives on comm.
  Engine& engine(Communicator& comm);
  // Settles the options the engine will be made with. Throws UsageError
  // (CHORUS_ERR_INVALID_USAGE) once the engine runs.
  void configure(const EngineOptions& options);
  // The engine once made, else nullptr; no lock.
  Engine* made() const { return made_.load(std::memory_order_acquire); }
  // The engine's counters; zeros before it is made.
  EngineStats stats() const;
  // Shuts the engine down, if made (Engine::shutdown).
  void shutdown();

 private:
  mutable std::mutex mu_;
  std::unique_ptr<Engine> engine_;
  // engine_ once made (it then lives as long as the slot): every fused
  // call after the first finds it without the lock.
  std::atomic<Engine*> made_{nullptr};
  std::optional<EngineOptions> options_;
};

}  // namespace chorus::fusion
