// The communicator: the unit of ordering. Every collective gets the next
// sequence number at the call, and calls execute strictly in that order:
// blocking calls on the caller's thread, non-blocking ones on the
// communicator's worker thread. The first communication error aborts the
// communicator (and tells the peers), after which every call fails with
// CHORUS_ERR_ABORTED quoting that first error.
//
// Terms:
//   sequence number  every collective's place in the communicator's order,
//                    taken when it is called; ranks must call in one order
//   turn             the right of call s to run, which comes once call s - 1
//                    has finished
//   link             the connections and store shared with split relatives
//                    (lib/comm/link.hpp)
//   teams            world (every rank), host (this host's ranks), leaders
//                    (each host's lowest rank): collectives/team.hpp
//
// One entry point per form: run() (blocking) and submit() (non-blocking)
// take a CollectiveCall, validate it once (collectives/call.hpp), choose its
// algorithm from the registry (collectives/tuner/selection.hpp) and run it
// over the world team. Point-to-point messages (send/recv) bypass the
// sequence: they are ordered per (peer, tag) by the transport.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/core/completion.hpp"
#include "base/core/config.hpp"
#include "base/core/contract.hpp"
#include "base/core/dtype.hpp"
#include "base/core/error.hpp"
#include "base/core/scratch.hpp"
#include "base/topology/host.hpp"
#include "collectives/call.hpp"
#include "collectives/context.hpp"
#include "collectives/team.hpp"
#include "collectives/team_hierarchy.hpp"
#include "collectives/tuner/selection.hpp"
#include "collectives/verdict/plan.hpp"
#include "lib/comm/link.hpp"
#include "transports/call_board.hpp"
#include "transports/transport.hpp"

namespace chorus {

// A submitted asynchronous collective. Done when its completion is.
class Work {
 public:
  using Body = std::function<void(CollectiveContext&)>;
  Work(CallSignature sig, std::size_t segment_bytes, Body body, VerdictPlan verdict = {})
      : sig_(sig), segment_bytes_(segment_bytes), body_(std::move(body)), verdict_(verdict) {}
  const CallSignature& signature() const { return sig_; }
  Completion& completion() { return completion_; }
  const Completion& completion() const { return completion_; }

 private:
  friend class Communicator;
  CallSignature sig_;
  std::size_t segment_bytes_;
  Body body_;
  VerdictPlan verdict_;
  Completion completion_;
};
using WorkPtr = std::shared_ptr<Work>;

// A point-to-point message in flight (isend / irecv).
struct Message {
  RequestPtr request;
  CallSignature sig;
};

// What a communicator is made of.
struct CommSetup {
  std::shared_ptr<Link> link;
  Config config;
  topology::HostMap hosts;   // the host of each rank of this communicator, in its rank order
  std::vector<int> members;  // this communicator's ranks as the transport numbers them
  uint32_t id = 0;           // tag space (link.hpp)
  int cpus_on_host = 0;      // CPUs this host's ranks may use between them; 0: online_cores()
  // Shared memory of this host's ranks (its ranks: their order here), when
  // allowed and two or more ranks share the host: the world team's too when
  // every rank is on this host.
  std::unique_ptr<shm::Domain> host_shm;
  // RoutePlan::shm_allowed: the ranks of any host share memory (the same on
  // every rank), so estimates of the stages within hosts assume it.
  bool hosts_share_memory = false;
  std::string name = "communicator";  // for logs ("comm1", "comm1.2")
};

class Communicator {
 public:
  explicit Communicator(CommSetup setup);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return world_.index; }
  int size() const { return world_.size(); }
  const Config& config() const { return config_; }
  const Team& world() const { return world_; }
  const Team& host_team() const { return host_; }
  // The team of the host leaders (lowest rank of each host), on leaders only.
  const Team* leaders() const { return leaders_ ? &*leaders_ : nullptr; }
  Transport& transport() { return *link_->transport; }
  // The connections, store and job identity this communicator shares with
  // its split relatives: a strategy that needs connections of its own
  // (lib/strategy/ps) meets its peers in the same store.
  const Link& link() const { return *link_; }
  const topology::HostMap& hosts() const { return hosts_; }
  // The link between hosts the cost model uses, and where it comes from.
  const NetworkLink& network() const { return network_; }
  const CostModel& cost_model() const { return cost_model_; }
  // How this communicator's waits poll (CHORUS_SPIN_US, CHORUS_WAIT_YIELD).
  // Fixed once the communicator is made (every non-blocking call copies it).
  const Spin& wait_spin() const { return spin_; }
  const shm::Domain* shm_domain() const { return world_.shm; }
  uint32_t id() const { return id_; }
  const std::string& name() const { return name_; }

  // The single checked entry points of every collective. An allreduce in
  // parts (CollectiveCall::scattered) runs blocking only.
  void run(const CollectiveCall& call, const Deadline& deadline);
  WorkPtr submit(const CollectiveCall& call);

  // Whether run() of `call` in parts (its buffers are not looked at) reads
  // and writes the parts where they lie, or packs them (collectives/
  // scattered.hpp). The same on every rank.
  bool reads_parts(const CollectiveCall& call);

  // What selection would choose for `call` here, with every candidate's
  // estimate or refusal (chorus-info, tests).
  Selection explain(const CollectiveCall& call) const;
  // Replaces CHORUS_ALGO and the tuning file (chorus-tune times each
  // algorithm in turn). Every rank sets the same, with no call in flight.
  void set_algo_override(AlgoOverride user);

  // Point-to-point: messages from one rank to another with a user tag
  // (0 <= tag <= kMaxUserTag), matched in order per (peer, tag); sizes must
  // agree exactly. A failure (peer gone, mismatch, deadline) aborts the
  // communicator, as a collective's does.
  void send(const void* buf, std::size_t count, DataType dtype, int peer, int tag,
            const Deadline& deadline);
  void recv(void* buf, std::size_t count, DataType dtype, int peer, int tag,
            const Deadline& deadline);
  Message isend(const void* buf, std::size_t count, DataType dtype, int peer, int tag);
  Message irecv(void* buf, std::size_t count, DataType dtype, int peer, int tag);
  // Waits for a message of isend/irecv. A failure aborts the communicator;
  // so does the deadline when abort_on_timeout (the blocking forms, which
  // hand the buffer back), else the message stays posted.
  void wait(const Message& message, const Deadline& deadline, bool abort_on_timeout = true);

  // Collective over this communicator: ranks with the same color form a new
  // communicator, ordered by (key, rank here); a negative color
  // (CHORUS_UNDEFINED) joins none and gets null. The child shares this
  // communicator's connections (no new rendezvous); it has its own sequence
  // numbers, contract checks, teams and shared-memory domains.
  std::unique_ptr<Communicator> split(int color, int key, const Deadline& deadline);
  // The same in two halves: the call takes its place in this communicator's
  // order now and returns at once; the function it returns finishes the
  // split (waiting for the exchange) on any thread, once. This communicator
  // must outlive that call.
  std::function<std::unique_ptr<Communicator>(const Deadline&)> start_split(int color, int key);

  // For a thread about to wait for `work` (chorus_wait): while the call at
  // the head of the queue has its turn, this thread runs it instead of leaving
  // it to the worker, up to `work` itself. Most programs wait soon after they
  // start a call; then no thread hand-off (a wake-up and a core) is needed.
  void run_queued_until(const Work& work);

  // Fails outstanding and later work here and at the peers. The connections
  // are shared with split relatives, which fail too. abort: the user's
  // (CHORUS_ERR_ABORTED, "rank R aborted: reason"); fail: a call's failure,
  // whose code and message every peer's call then fails with.
  void abort(const std::string& reason);
  void fail(chorus_result_t code, const std::string& message);
  // Waits for outstanding work (bounded), stops the worker; the last
  // communicator of a link says goodbye to the peers. Later calls fail with
  // CHORUS_ERR_INVALID_USAGE.
  void destroy();

  // CHORUS_TIMEOUT from now, on the coarse clock (up to Deadline::kCoarseSlack late).
  Deadline default_deadline() const;

 private:
  // The algorithm for a call (cached per collective for repeated calls of
  // one shape; logged with why at debug), recorded in sig.algo.
  const AlgorithmSpec& choose(const CollectiveCall& call, const CallShape& shape,
                              CallSignature& sig);
  std::size_t segment_bytes_for(std::size_t bytes) const;
  // run() of an allreduce in parts (CollectiveCall::scattered).
  void run_parts(const CollectiveCall& call, const CallShape& shape, const Deadline& deadline);
  // The algorithm that runs `call` in parts where they lie (with its
  // signature and verdict plan), or null where they are packed.
  const AlgorithmSpec* parts_reader(const CollectiveCall& call, const CallShape& shape,
                                    CallSignature& sig, VerdictPlan& verdict);
  // Blocking calls run the body on the caller's thread once their turn has
  // come, with no Work object: nothing is allocated on the latency path.
  template <typename Body>
  void run_blocking(CallSignature sig, const Deadline& deadline, std::size_t segment_bytes,
                    const Body& body, VerdictPlan verdict = {});
  WorkPtr run_async(CallSignature sig, std::size_t segment_bytes, Work::Body body,
                    VerdictPlan verdict = {});
  void assign_seq_locked(CallSignature& sig);
  // The slow way to a turn: under mu_, behind earlier asynchronous calls;
  // aborts the communicator if the deadline passes first.
  void wait_for_turn(CallSignature& sig, const Deadline& deadline);
  // Runs one call whose turn has come; its error, or null. Aborts the
  // communicator on failure.
  // `verdict`: the round after the body, or where a replicated call's
  // result lies, kept for survivors and recovered from them
  // (collectives/verdict/plan.hpp).
  template <typename Body>
  std::exception_ptr execute(const CallSignature& sig, const Deadline& deadline,
                             std::size_t segment_bytes, const Body& body,
                             const VerdictPlan& verdict);
  // After replicated call `sig` failed here with `code` (a peer failure or
  // the deadline; `why`): asks the live peers whether one finished it, and
  // if so takes its result into `result` and marks the call finished here
  // (recover.hpp).
  bool recovered_from_survivor(const CallSignature& sig, std::span<std::byte> result,
                               chorus_result_t code, const std::string& why);
  // How `call`, run by `algo` as `sig`, reaches one verdict on every rank
  // (plan.hpp).
  VerdictPlan verdict_for(const CollectiveCall& call, const CallShape& shape,
                          const AlgorithmSpec& algo, const CallSignature& sig) const;
  // Advances the turn past `seq` and wakes whoever can use it.
  void finish_turn(uint64_t seq);
  void worker_loop();
  bool front_ready_locked() const;  // the queue's head has its turn (mu_ held)
  WorkPtr pop_front_locked();
  // Runs a dequeued asynchronous call: completes or fails it, ends its turn.
  void run_queued(Work& work);
  void check_usable_locked() const;
  void check_usable();
  // An error's message with the job ranks it names translated to this
  // communicator's ranks (split communicators).
  std::string with_local_ranks(const std::string& message) const;
  NetworkLink link_network();
  // split's parts (split.cpp): the exchange of every rank's (color, key,
  // proposed id), and the child built from its result.
  struct SplitExchange;
  std::shared_ptr<SplitExchange> split_exchange_start(int color, int key);
  std::unique_ptr<Communicator> split_finish(const std::vector<int64_t>& all, int color, int key,
                                             const Deadline& deadline);
  // Point-to-point helpers (p2p.cpp).
  CallSignature p2p_signature(std::size_t count, DataType dtype, int receiver, int tag, int peer,
                              bool sending);
  [[noreturn]] void fail_p2p(const std::exception_ptr& error, const CallSignature& sig);

  std::shared_ptr<Link> link_;
  Config config_;
  topology::HostMap hosts_;
  uint32_t id_;
  std::string name_;
  std::unique_ptr<shm::Domain> host_shm_;
  bool hosts_share_memory_ = false;
  Team world_;
  Team host_;
  std::optional<Team> leaders_;
  AlgoOverride algo_override_;                // CHORUS_ALGO and CHORUS_TUNING_FILE
  std::chrono::nanoseconds default_timeout_;  // CHORUS_TIMEOUT
  NetworkLink network_;
  CostModel cost_model_;
  // The ring and Rabenseifner allreduces' rounds (ring_round_bytes): the
  // configured size, or by default kRingRoundBytes when every rank is on
  // this host, where transfers are memory copies.
  std::size_t ring_round_bytes_ = 0;
  static constexpr std::size_t kRingRoundBytes = std::size_t{1} << 20;
  Spin spin_;
  // The world's sub-teams when its ranks span hosts (world_.hierarchy).
  std::unique_ptr<TeamHierarchy> hierarchy_;
  ScratchPool scratch_;  // used only by the executing call (one at a time)
  // An allreduce in parts that its algorithm cannot take, packed (run() on
  // the caller's thread; one blocking call at a time on a communicator).
  ScratchPool packed_parts_;

  // The last choice per collective: repeated calls of one shape (the common
  // case in training) skip selection. Key: bytes << 16 | dtype << 8 | op
  // (kNoChoice: none); id: CallSignature::algo. A reader takes the id only if
  // the key reads the same before and after it (writers clear the key first),
  // so concurrent callers never pair one shape's key with another's id.
  static constexpr uint64_t kNoChoice = ~uint64_t(0);
  std::array<std::atomic<uint64_t>, kCollectiveKinds> cache_key_;
  std::array<std::atomic<uint8_t>, kCollectiveKinds> cache_id_;

  // Point-to-point sequence numbers per (peer, tag), one per direction.
  std::mutex p2p_mu_;
  std::map<std::pair<int, int>, uint64_t> sent_, received_;

  // Lock order: mu_ is never held while a collective runs; p2p_mu_ is a
  // leaf (nothing is locked while holding it).
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
  // Where this communicator's calls are, for the stuck-rank report and the
  // calls a failure spares (the transport's CallBoard; it outlives us).
  CallBoard::Slot* progress_ = nullptr;
  std::deque<WorkPtr> queue_;           // asynchronous work not yet started (mu_)
  std::atomic<std::size_t> queued_{0};  // queue_.size() (raised under mu_)
  std::string abort_reason_;            // non-empty once aborted (mu_)
  std::atomic<bool> aborted_{false};    // abort_reason_ is set
  std::atomic<bool> destroyed_{false};  // destroy() began (set under mu_)
  bool stop_worker_ = false;            // (mu_)
  std::thread worker_;
};

}  // namespace chorus
