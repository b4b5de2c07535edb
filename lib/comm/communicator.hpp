// The communicator: the unit of ordering. Every collective gets the next
// sequence number at the call, and calls execute strictly in that order:
// blocking calls on the caller's thread, non-blocking ones on the
// communicator's worker thread. The first communication error aborts the
// communicator (and tells the peers), after which every call fails with
// CHORUS_ERR_ABORTED quoting that first error.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "collectives/context.hpp"
#include "collectives/tuner/selection.hpp"
#include "base/core/completion.hpp"
#include "base/core/config.hpp"
#include "base/core/contract.hpp"
#include "base/core/dtype.hpp"
#include "base/core/scratch.hpp"
#include "transports/transport.hpp"

namespace chorus {

// A submitted asynchronous collective. Done when its completion is.
class Work {
 public:
  using Body = std::function<void(CollectiveContext&)>;
  Work(CallSignature sig, Body body) : sig_(sig), body_(std::move(body)) {}
  const CallSignature& signature() const { return sig_; }
  Completion& completion() { return completion_; }
  const Completion& completion() const { return completion_; }

 private:
  friend class Communicator;
  CallSignature sig_;
  Body body_;
  Completion completion_;
};
using WorkPtr = std::shared_ptr<Work>;

class Communicator {
 public:
  // `keepalive` owns whatever must outlive the transport (the store, a store
  // server hosted by this rank).
  // ranks_on_host: how many ranks of the job share this machine, cpus_on_host:
  // how many CPUs they may use between them (together they set the spinning
  // policy and the cost model); 0 means all ranks / online_cores().
  // shm: the shared-memory domain of the communicator's ranks, when they all
  // share a host and shared memory is allowed (then collectives use it).
  Communicator(std::unique_ptr<Transport> transport, std::shared_ptr<void> keepalive,
               const Config& config, int ranks_on_host = 0, int cpus_on_host = 0, uint32_t tag = 1,
               std::unique_ptr<shm::Domain> shm = nullptr);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return transport_->rank(); }
  int size() const { return transport_->size(); }
  const Config& config() const { return config_; }
  Transport& transport() { return *transport_; }
  const shm::Domain* shm_domain() const { return shm_.get(); }

  // Blocking forms take an explicit deadline; asynchronous forms get one of
  // CHORUS_TIMEOUT from the moment they start executing.
  void allreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                 const Deadline& deadline);
  void broadcast(void* buf, std::size_t count, DataType dtype, int root, const Deadline& deadline);
  void allgather(const void* send, void* recv, std::size_t sendcount, DataType dtype,
                 const Deadline& deadline);
  void reduce_scatter(const void* send, void* recv, std::size_t recvcount, DataType dtype,
                      ReduceOp op, const Deadline& deadline);
  void barrier(const Deadline& deadline);

  WorkPtr iallreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op);
  WorkPtr ibroadcast(void* buf, std::size_t count, DataType dtype, int root);
  WorkPtr iallgather(const void* send, void* recv, std::size_t sendcount, DataType dtype);
  WorkPtr ireduce_scatter(const void* send, void* recv, std::size_t recvcount, DataType dtype,
                          ReduceOp op);
  WorkPtr ibarrier();

  // For a thread about to wait for `work` (chorus_wait): while the call at
  // the head of the queue has its turn, this thread runs it instead of leaving
  // it to the worker, up to `work` itself. Most programs wait soon after they
  // start a call; then no thread hand-off (a wake-up and a core) is needed.
  void run_queued_until(const Work& work);

  // Fails outstanding and later work here and at the peers.
  void abort(const std::string& reason);
  // Waits for outstanding work (bounded), says goodbye to the peers, stops the
  // worker. Later calls fail with CHORUS_ERR_INVALID_USAGE.
  void destroy();

  // CHORUS_TIMEOUT from now, on the coarse clock (up to Deadline::kCoarseSlack late).
  Deadline default_deadline() const;

 private:
  // Each collective's call: validates the arguments (before a sequence
  // number is taken), chooses the algorithm, and hands the signature and a
  // body (capturing the arguments by value) to `run`, returning what it does.
  template <typename Run>
  decltype(auto) allreduce_call(const void* send, void* recv, std::size_t count, DataType dtype,
                                ReduceOp op, Run&& run);
  template <typename Run>
  decltype(auto) broadcast_call(void* buf, std::size_t count, DataType dtype, int root, Run&& run);
  template <typename Run>
  decltype(auto) allgather_call(const void* send, void* recv, std::size_t sendcount, DataType dtype,
                                Run&& run);
  template <typename Run>
  decltype(auto) reduce_scatter_call(const void* send, void* recv, std::size_t recvcount,
                                     DataType dtype, ReduceOp op, Run&& run);
  template <typename Run>
  decltype(auto) barrier_call(Run&& run);

  // What the *_call functions hand the call to: run_blocking with this
  // deadline, or run_async.
  auto blocking(const Deadline& deadline);
  auto async();
  // Blocking calls run the body on the caller's thread once their turn has
  // come, with no Work object: nothing is allocated on the latency path.
  template <typename Body>
  void run_blocking(CallSignature sig, const Deadline& deadline, const Body& body);
  WorkPtr run_async(CallSignature sig, Work::Body body);
  void assign_seq_locked(CallSignature& sig);
  // The slow way to a turn: under mu_, behind earlier asynchronous calls;
  // aborts the communicator if the deadline passes first.
  void wait_for_turn(CallSignature& sig, const Deadline& deadline);
  // Runs one call whose turn has come; its error, or null. Aborts the
  // communicator on failure.
  template <typename Body>
  std::exception_ptr execute(const CallSignature& sig, const Deadline& deadline, const Body& body);
  // Advances the turn past `seq` and wakes whoever can use it.
  void finish_turn(uint64_t seq);
  std::size_t segment_bytes_for(const CallSignature& sig) const;
  // The algorithm for a call (logged with why at debug), recorded in sig.algo.
  Algorithm choose(CallSignature& sig, std::size_t bytes);
  void worker_loop();
  // The queue's head has its turn (mu_ held).
  bool front_ready_locked() const;
  WorkPtr pop_front_locked();
  // Runs a dequeued asynchronous call: completes or fails it, ends its turn.
  void run_queued(Work& work);
  void check_usable_locked() const;

  std::unique_ptr<Transport> transport_;
  std::unique_ptr<shm::Domain> shm_;
  std::shared_ptr<void> keepalive_;
  Config config_;
  uint32_t tag_;
  AlgoOverride algo_override_;                // parsed CHORUS_ALGO
  std::chrono::nanoseconds default_timeout_;  // CHORUS_TIMEOUT
  CostModel cost_model_;
  ScratchPool scratch_;  // used only by the executing call (one at a time)

  // Lock order: mu_ is never held while a collective runs.
  //
  // The turn: calls run in sequence order. A blocking call with nothing
  // outstanding takes its number and its turn without mu_, by one
  // compare-exchange of next_seq_ from executed_seq_ + 1. Whoever ends a turn
  // stores executed_seq_ and then reads turn_waiters_ and queued_; whoever
  // waits for a turn (a blocking caller, destroy, the worker) raises those
  // under mu_ before it reads executed_seq_ (all seq_cst). So either the
  // waiter sees the new turn or the finisher sees the waiter and notifies
  // under mu_.
  std::mutex mu_;
  std::condition_variable turn_cv_;        // executed_seq_ advanced (blocking callers, destroy)
  std::condition_variable work_cv_;        // queue changed or stop (the worker)
  std::atomic<int> turn_waiters_{0};       // threads waiting on turn_cv_ (raised under mu_)
  std::atomic<uint64_t> next_seq_{1};      // sequence number of the next call
  std::atomic<uint64_t> executed_seq_{0};  // last sequence number that finished
  std::deque<WorkPtr> queue_;              // asynchronous work not yet started (mu_)
  std::atomic<std::size_t> queued_{0};     // queue_.size() (raised under mu_)
  std::string abort_reason_;               // non-empty once aborted (mu_)
  std::atomic<bool> aborted_{false};       // abort_reason_ is set
  std::atomic<bool> destroyed_{false};     // destroy() began (set under mu_)
  bool stop_worker_ = false;               // (mu_)
  std::thread worker_;
};

}  // namespace chorus
