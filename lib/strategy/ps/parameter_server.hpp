// The parameter-server strategy: asynchronous data parallelism, as
// TensorFlow's ParameterServerStrategy. The last `servers` ranks of the
// communicator are parameter servers; rank 0 is the chief, the others
// workers (chorusrun --ps K and TF_CONFIG number them so:
// base/bootstrap/tf_cluster.hpp). The chief trains as a worker does and also
// initialises, saves and restores the variables.
//
//   every rank:  add_variable(name, data, gradient, count, dtype)   same order everywhere
//                start()                       collective: the chief's values on the servers
//   servers:     serve(optimizer)              until every worker is done or failed
//   workers:     per step: pull(); compute the gradients; push()
//                finish()                      then destroy
//   the chief:   save(path) / restore(path)    a checkpoint of every variable
//
// Variables are placed whole on the servers by size (sharding.hpp); a
// server keeps the values and the optimizer's state of its variables and
// applies each update (optimizer.hpp). Modes:
//   async     a pull returns the values as they are; each push is applied
//             at once, on its own (TensorFlow's asynchronous training);
//   sync      step s starts (pull) once the updates of steps < s are applied,
//             and step s's update is the mean of the gradients every live
//             worker pushed for it: the same result as one process on the
//             concatenated batch;
//   bounded   as async, but a worker starts step s only once every live
//             worker has pushed s - max_staleness steps: no worker is more
//             than max_staleness steps ahead of the slowest.
//
// Failures. The strategy has connections of its own (a TCP transport with
// isolated peer failures, meeting in the communicator's store), so a worker
// that dies fails only its own requests: the servers count it out (a sync
// step completes without it) and report it in every reply, which the chief
// logs and failed_workers() returns; training goes on. A server that dies
// fails every worker's next request to it with CHORUS_ERR_PEER_FAILURE
// naming it ("parameter server 0 (rank 3) failed: ..."), which fails the
// job. The communicator is used only by the constructor and start().
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/core/deadline.hpp"
#include "base/core/dtype.hpp"
#include "lib/comm/communicator.hpp"
#include "lib/strategy/optimizer.hpp"
#include "lib/strategy/ps/protocol.hpp"
#include "transports/transport.hpp"

namespace chorus::strategy::ps {

// The values are chorus_ps_mode_t's.
enum class Mode : uint8_t { async = 0, sync = 1, bounded = 2 };
// The values are chorus_ps_role_t's.
enum class Role : uint8_t { chief = 0, worker = 1, server = 2 };

struct Options {
  // The last `servers` ranks; at least 1, fewer than the ranks. 0: as many
  // as TF_CONFIG has ps tasks (chorusrun --ps K writes it).
  int servers = 1;
  Mode mode = Mode::async;
  int max_staleness = 0;  // bounded only; 0 or more
};

class Server;

class ParameterServer {
 public:
  // Collective over comm (it agrees on a store namespace and connects every
  // rank to every other). Throws UsageError for bad options, or more than 64
  // ranks (the failure report is a 64-bit mask).
  ParameterServer(Communicator& comm, Options options);
  ~ParameterServer();
  ParameterServer(const ParameterServer&) = delete;
  ParameterServer& operator=(const ParameterServer&) = delete;

  Role role() const { return role_; }
  // The index among the ranks of its role (server 0 is rank size - servers).
  int role_index() const;

  // Before start(), in the same order on every rank. data: the worker's copy
  // (filled by pull, the chief's initialises the servers); gradient: what
  // push sends. Servers pass null for both and keep their own copy.
  // dtype float32 or float64.
  void add_variable(const std::string& name, void* data, void* gradient, std::size_t count,
                    DataType dtype);
  // Collective over the communicator.
  void start(const Deadline& deadline);

  // Workers.
  void pull(const Deadline& deadline);
  void push(const Deadline& deadline);
  void finish(const Deadline& deadline);
  int64_t step() const { return step_; }  // pushes done
  // Ranks the servers reported failed (every worker learns with its replies).
  std::vector<int> failed_workers() const;
  // The chief: every variable's current value to / from a checkpoint file
  // (checkpoint.hpp). restore also sets the chief's own copies.
  void save(const std::string& path, const Deadline& deadline);
  void restore(const std::string& path, const Deadline& deadline);

  // Servers: answers the workers until each is done or has failed.
  void serve(const OptimizerOptions& optimizer);

  struct Variable {
    std::string name;
    std::byte* data = nullptr;
    std::byte* gradient = nullptr;
    std::size_t count = 0;
    DataType dtype = DataType::f32;
    int shard = 0;           // the server index that holds it
    std::size_t offset = 0;  // its bytes' place in its shard's buffer
    std::size_t bytes() const { return count * dtype_size(dtype); }
  };

 private:
  int server_rank(int server) const { return size_ - options_.servers + server; }
  bool is_worker_rank(int rank) const { return rank < size_ - options_.servers; }
  // Copies between the worker's variables and a shard's buffer.
  void pack(int shard, bool gradients, std::vector<std::byte>& buffer) const;
  void unpack(int shard, const std::vector<std::byte>& buffer);
  // Sends a request (and its payload) to every server, then takes every
  // reply; with reply payloads, into buffers_[server].
  void round_trip(Kind kind, bool send_payload, bool expect_payload, const Deadline& deadline);
  void note_failures(uint64_t failed);
  [[noreturn]] void server_failed(int server, const std::exception_ptr& error) const;
  void check_role(bool worker_call, const char* call) const;

  Communicator& comm_;
  const Options options_;
  const int rank_, size_;
  const Role role_;
  std::unique_ptr<Transport> transport_;
  std::vector<Variable> variables_;
  std::vector<std::size_t> shard_bytes_;                 // per server
  std::vector<std::vector<std::byte>> buffers_;          // per server: staging for payloads
  std::vector<Header> request_headers_, reply_headers_;  // per server, of the round trip
  std::exception_ptr broken_;  // a round trip failed: every later one throws this
  bool started_ = false;
  bool finished_ = false;  // a worker after finish()
  int64_t step_ = 0;
  mutable std::mutex failed_mu_;  // guards failed_
  uint64_t failed_ = 0;
  std::unique_ptr<Server> server_;  // a server's state
};

}  // namespace chorus::strategy::ps
