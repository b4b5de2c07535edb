// One parameter server's side of the strategy (parameter_server.hpp): the
// values and optimizer state of its shard, and a thread per worker that
// answers that worker's requests (protocol.hpp) until it is done or fails.
//
// Locking: mu_ guards the shard and the workers' states; a worker's thread
// holds it only while it reads or changes them, never across a transport
// wait. cv_ wakes pulls that wait for their step (sync, bounded) whenever an
// update is applied or a worker leaves.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "lib/strategy/optimizer.hpp"
#include "lib/strategy/ps/parameter_server.hpp"

namespace spdlog {
class logger;
}

namespace chorus::strategy::ps {

// The parameter server's logger ("ps"), for the strategy's files.
spdlog::logger& log();

class Server {
 public:
  // variables: this server's, with their offsets in the shard buffer of
  // `bytes`; workers: the ranks it serves.
  Server(Transport& transport, Options options, std::vector<ParameterServer::Variable> variables,
         std::size_t bytes, std::vector<int> workers);

  // start(): the chief's initial values (one kSet request).
  void receive_initial(int chief, const Deadline& deadline);
  void serve(const OptimizerOptions& optimizer);

 private:
  struct WorkerState {
    int64_t pushed = 0;  // steps pushed
    bool live = true;    // neither done nor failed
  };
  void serve_worker(int worker);
  // Returns false when the worker failed (its requests fail) or is done.
  bool answer(int worker, const Header& request);
  void reply(int worker, const std::vector<std::byte>* payload);
  void receive(int worker, uint32_t tag, void* data, std::size_t bytes);
  bool may_start_locked(int64_t step) const;
  void apply_locked(const std::byte* gradients);
  void push_locked(int worker, int64_t step, const std::byte* gradients);
  void complete_sync_step_locked();
  void leave_locked(int worker, bool failed);

  Transport& transport_;
  const Options options_;
  const std::vector<ParameterServer::Variable> variables_;
  const std::size_t bytes_;
  const OptimizerOptions* optimizer_ = nullptr;  // during serve()

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::byte> values_;  // the shard
  std::vector<OptimizerState> states_;
  std::vector<std::byte> sum_;  // sync: the gradients pushed for the current step
  int contributors_ = 0;        // sync: how many pushed it
  int64_t version_ = 0;         // updates applied
  std::map<int, WorkerState> workers_;
  uint64_t failed_ = 0;  // bit r: rank r failed
};

}  // namespace chorus::strategy::ps
