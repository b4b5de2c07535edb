// The fusion engine: many small allreduces at the speed of a few large ones,
// as Horovod's and PyTorch DDP's gradient buckets do. One per communicator
// (made on its first fused call), over a communicator of its own split off
// from it, so the engine's collectives never interleave with the user's.
//
//   submit(name, send, recv, count, dtype, op)   returns at once
//   a background thread (or a thread about to wait for a tensor, when the
//   cycle is due at once: run_due_cycle), every cycle:
//     1. negotiate (negotiation.hpp): which named tensors are pending on
//        every rank with one spec; one MIN allreduce of a byte per known
//        tensor when nothing new happened, else a full exchange of names;
//     2. group the ready tensors by (dtype, op) into buckets of at most
//        CHORUS_FUSION_BYTES and run one allreduce per bucket (normal
//        algorithm selection) on the user's buffers: a bucket of one
//        tensor, or of tensors back to back in memory in bucket order, as
//        one buffer; any other as a call in parts (collectives/
//        scattered.hpp), which the communicator's algorithm reads where the
//        tensors lie or the communicator packs;
//     3. complete each tensor's request.
//   A cycle starts at once when every known tensor (or CHORUS_FUSION_BYTES
//   of them) has been submitted here; else CHORUS_FUSION_CYCLE_MS after the
//   last one ended or the first pending tensor came, whichever is later; a
//   rank with nothing pending joins the rounds every 10 ms.
//
// Locks: cycle_mu_ (whoever runs a cycle: the cycle state below) before mu_
// (what submitting threads share). Submitters take mu_ only.
//
// Verdicts (every rank reaches the same one for a tensor, because each is a
// function of data the cycle gave every rank alike):
//   a name submitted with different counts, dtypes or ops: every pending
//     request fails with CHORUS_ERR_MISMATCH naming the tensor and both ranks;
//   a tensor some ranks submitted and others did not: a warning names it and
//     the ranks lacking it every CHORUS_FUSION_STALL_S; at CHORUS_TIMEOUT
//     every pending request fails with CHORUS_ERR_TIMEOUT and that text;
//   a failed collective (a peer died, an abort): every pending request fails
//     with its error;
//   a rank that shuts its engine down (chorus_comm_destroy): the cycle that
//     learns of it finishes the tensors ready everywhere, and the rest fail
//     with CHORUS_ERR_PEER_FAILURE naming the rank and the tensors it lacks.
// After any of these the engine is stopped and later submissions fail the
// same way.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/core/completion.hpp"
#include "collectives/scattered.hpp"
#include "lib/comm/communicator.hpp"
#include "lib/fusion/negotiation.hpp"
#include "lib/fusion/timeline.hpp"

namespace chorus::fusion {

using Clock = std::chrono::steady_clock;

// A tensor name's record, made by its first submission and kept while the
// name is known or pending (names repeat every step): a submission of a name
// seen before costs one hash lookup and allocates nothing for the name.
struct NameSlot {
  explicit NameSlot(std::string_view n) : name(n) {}
  const std::string name;
  // Both under the engine's mu_. known_id is written by a cycle (under
  // cycle_mu_ as well), which also reads it without mu_.
  bool outstanding = false;  // a tensor of this name is pending or incoming
  int64_t known_id = -1;     // the KnownTable id of the name; -1: not known
  // The name submitted right after this one last time (under mu_): names
  // come in the same order step after step, so the next submission is
  // usually that one, found by a comparison instead of a hash lookup.
  NameSlot* next = nullptr;
};

// One submitted tensor; done when its completion is.
struct FusedTensor {
  // The engine's record of the name. Valid until the tensor is done: a cycle
  // may forget an idle name after that (a shared_ptr would cost two atomic
  // operations per tensor and step).
  NameSlot* slot = nullptr;
  TensorShape shape;
  const void* send = nullptr;
  void* recv = nullptr;
  // When it was submitted (with the timeline on) or taken in by a cycle
  // (within a cycle of it): what stall and timeout checks count from.
  Clock::time_point submitted;
  Completion completion;
  // Cycle state (cycle_mu_): the known id of the name with this shape (-1:
  // none), found by each negotiation round; its place in the round's ready
  // list (-1: not ready).
  int64_t known_id = -1;
  int64_t ready_index = -1;
  // Whether it lies right after the tensor before it in the round's ready
  // list on every rank (plan_buckets's follows_of).
  bool follows = false;

  const std::string& name() const { return slot->name; }
  TensorSpec spec() const { return {slot->name, shape.count, shape.dtype, shape.op}; }
};
using FusedPtr = std::shared_ptr<FusedTensor>;

// Where the engine's communicator packs a bucket's tensors into one buffer
// (an allreduce that does not take parts, or compressed on the wire),
// tensors of this size or more are reduced alone by default: 64 tensors
// apart on 2 ranks, fused against one allreduce each, took 0.56x at 4K,
// 1.0x at 64K and 2.1x at 256K over shared memory, 1.3x over TCP
// (2026-12-03). Where it reads them where they lie, none are: 64 x 64K
// apart over shared memory, 1.0x of one buffer fused against 2.0x alone;
// over TCP (the ring in parts) 64 x 64K, 256K and 1M in one bucket took
// 0.94x, 0.84x and 1.05x of the time alone at 2 ranks, 64K and 256K 0.67x
// and 0.64x at 4 (Rabenseifner in parts) (2026-12-06, docs/benchmarks.md).
inline constexpr std::size_t kPackedAloneBytes = 64 << 10;

struct EngineOptions {
  double cycle_ms = 1;
  std::size_t fusion_bytes = 64 << 20;
  // nullopt: none where the engine's communicator reads a bucket's tensors
  // where they lie, else kPackedAloneBytes (chosen on the engine's thread).
  std::optional<std::size_t> alone_bytes;
  double stall_s = 60;
  std::size_t cache = 1024;
  double timeout_s = 300;
  std::string timeline;  // CHORUS_TIMELINE
  // float32 buckets: the dtype on the wire (float32: uncompressed); nullopt:
  // CHORUS_WIRE_DTYPE (the communicator's default).
  std::optional<DataType> wire;
  static EngineOptions from(const Config& config);
};

struct EngineStats {
  uint64_t cycles = 0;       // negotiation rounds
  uint64_t fast_cycles = 0;  // of which took the known-tensor fast path only
  uint64_t slow_cycles = 0;  // of which exchanged names
  uint64_t allreduces = 0;   // collective calls that reduced tensors
  uint64_t tensors = 0;      // tensors reduced
  uint64_t bytes = 0;        // bytes reduced (sum of the tensors' sizes)
};

class Engine {
 public:
  // make_comm gives the engine's communicator (Communicator::start_split's
  // second half); it runs on the engine's thread.
  using MakeComm = std::function<std::unique_ptr<Communicator>(const Deadline&)>;
  Engine(MakeComm make_comm, int rank, int size, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a tensor for the next cycle. Throws UsageError for a name already
  // pending here, and the engine's error once it has stopped.
  FusedPtr submit(std::string_view name, TensorShape shape, const void* send, void* recv);
  // The same for a tensor the caller made, with its shape and buffers set
  // (the C API makes it in one allocation with its request). A FusedPtr
  // that owns nothing (aliasing an empty one) lends the tensor: the caller
  // keeps it alive until it is done, and the engine touches it no more from
  // the moment it is (the C API's request: no reference count to pay).
  void submit(std::string_view name, FusedPtr tensor);
  // Tells the peers, finishes what is ready everywhere, fails the rest, and
  // stops (bounded by CHORUS_TIMEOUT). Idempotent.
  void shutdown();
  EngineStats stats() const;
  // For a thread about to wait for one of this engine's tensors: when the
  // next cycle is due at once (every tensor known here is in) and no cycle
  // runs, runs it on this thread, sparing the step two hand-offs between
  // threads (a wake-up of the engine's thread, and of this one when its
  // tensor is done). Blocks for as long as the cycle takes (bounded by
  // CHORUS_TIMEOUT); returns at once otherwise.
  void run_due_cycle();
  // The name of a tensor submitted here, or nullopt once it is done (for a
  // wait's timeout message: the name's record may go after that).
  std::optional<std::string> name_if_pending(const FusedTensor& tensor) const;
  // For a thread about to wait for one of this engine's tensors without
  // running the cycle itself (a wait with a timeout, a test, the mirrored
  // strategy): wakes the engine's thread when the next cycle is due at once.
  // Submissions do not wake it for that; without a kick or a waiter that
  // runs it, such a cycle starts CHORUS_FUSION_CYCLE_MS after the step's
  // first submission.
  void kick();

 private:
  void main();
  // Takes in the submissions and runs a cycle (cycle_mu_ held).
  void run_cycle_locked();
  // When the next timed cycle is due, the last having ended at `last_end`
  // (mu_ held).
  Clock::time_point due_locked(Clock::time_point last_end) const;
  // One negotiation round and the work it frees; false once the engine stops.
  bool cycle();
  // The tensors to reduce now, in order; sets stop when the engine must stop
  // after reducing them (or at once: nothing ready).
  // A verdict that ends the engine, and whether its text names the tensors
  // it fails already (negotiation's mismatch, timeout and stall verdicts do).
  struct Stop {
    std::exception_ptr error;
    bool names_tensors = false;
  };
  // Tensors of pending_, which keeps them (a cycle's own references would
  // cost two atomic operations per tensor).
  std::vector<FusedTensor*> negotiate(Stop& stop);
  void execute(std::vector<FusedTensor*> ready, Clock::time_point agreed);
  void run_bucket(std::span<FusedTensor* const> tensors, std::size_t bytes,
                  Clock::time_point agreed);
  // Completes a bucket's tensors and forgets them; names reduced for the
  // first time become known.
  void complete(std::span<FusedTensor* const> tensors);
  // Drops the slots of names neither known nor outstanding (mu_ and
  // cycle_mu_ held: at a cycle's start, when every tensor of such a name is
  // done), so that names used once do not pile up.
  void forget_idle_names_locked();
  // Fails every pending tensor and stops the engine with `cause`, naming in
  // each request's error the tensors it fails here (unless `names_tensors`:
  // negotiation's own verdicts name them); a later submission gets `cause`
  // naming its own tensor.
  void stop_with(std::exception_ptr cause, bool names_tensors = false);
  // A failure met mid-cycle (a peer left, died or aborted) names the call
  // and the rank; the same failure with `specs` named as the tensors it
  // fails on this rank, since those are what the user submitted.
  std::exception_ptr naming(std::exception_ptr error, std::span<const TensorSpec> specs) const;
  bool triggered_locked() const;
  Deadline deadline() const;

  const int rank_, size_;
  const EngineOptions options_;
  MakeComm make_comm_;
  // Cycle state: whoever runs a cycle holds cycle_mu_.
  std::mutex cycle_mu_;
  std::unique_ptr<Communicator> comm_;  // made by the engine's thread first
  Clock::time_point last_end_;          // when the last cycle ended
  KnownTable known_;
  // options_.alone_bytes, or what it means when unset (set with comm_).
  std::size_t alone_bytes_ = kPackedAloneBytes;
  std::vector<FusedPtr> pending_;  // submission order
  ScatteredBuffers bucket_parts_;  // a bucket's tensors that lie apart
  Clock::time_point last_stall_warning_{};
  Timeline timeline_;
  const bool timed_;  // the timeline is on (read by submitting threads too)
  // No more cycles: the engine stopped (set under cycle_mu_, read anywhere).
  std::atomic<bool> cycles_over_{false};

  // Shared with submitting threads (mu_).
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<FusedPtr> incoming_;
  // Every name known or outstanding (and some idle ones, until the table
  // outgrows names_limit_); keys view the slots' names.
  struct NameHash {  // XXH3: a third of std::hash's instructions on short names
    std::size_t operator()(std::string_view name) const noexcept;
  };
  std::unordered_map<std::string_view, std::unique_ptr<NameSlot>, NameHash> names_;
  std::size_t names_limit_;
  NameSlot* last_submitted_ = nullptr;  // the slot of the last submission
  std::size_t outstanding_count_ = 0;   // tensors pending or incoming
  std::size_t outstanding_bytes_ = 0;
  // When the first of the outstanding tensors was submitted (none before).
  Clock::time_point outstanding_since_{};
  std::size_t known_count_ = 0;  // known_.size(), published by each cycle
  bool shutdown_requested_ = false;
  bool trigger_ = false;        // every known name is in: a cycle is due at once
  bool kicked_ = false;         // the engine's thread was woken for trigger_
  std::exception_ptr stopped_;  // why the engine stopped: every later submission fails with it
  EngineStats stats_;

  std::thread thread_;
};

}  // namespace chorus::fusion
