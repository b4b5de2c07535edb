#include "lib/comm/communicator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <set>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "collectives/allreduce/wire.hpp"
#include "collectives/patterns/hierarchy.hpp"
#include "collectives/registry.hpp"
#include "collectives/scattered.hpp"
#include "collectives/shm/domain.hpp"
#include "collectives/tuner/tuning_file.hpp"
#include "collectives/verdict/agree.hpp"
#include "collectives/verdict/recover.hpp"
#include "lib/comm/host_domain.hpp"
#include "lib/comm/link_probe.hpp"

namespace chorus {
namespace {

spdlog::logger& comm_log() {
  static spdlog::logger& subsystem = logger("comm");  // the registry locks a mutex
  return subsystem;
}

}  // namespace

Communicator::~Communicator() {
  try {
    destroy();
  } catch (const std::exception& e) {
    comm_log().warn("rank {}: error while destroying the communicator: {}", rank(), e.what());
  }
}

Deadline Communicator::default_deadline() const {
  return Deadline::after_coarse(default_timeout_);
}

void Communicator::check_usable_locked() const {
  if (destroyed_.load())
    throw UsageError(CHORUS_ERR_INVALID_USAGE, "communicator used after chorus_comm_destroy");
  if (!abort_reason_.empty())
    throw IoError(CHORUS_ERR_ABORTED,
                  fmt::format("communicator was aborted earlier: {}", abort_reason_));
}

void Communicator::assign_seq_locked(CallSignature& sig) {
  check_usable_locked();
  sig.seq = next_seq_.fetch_add(1);
}

template <typename Body>
void Communicator::run_blocking(CallSignature sig, const Deadline& deadline,
                                std::size_t segment_bytes, const Body& body, VerdictPlan verdict) {
  // Nothing outstanding: the next number is this call's, and so is the turn.
  uint64_t done = executed_seq_.load();
  uint64_t expected = done + 1;
  if (!aborted_.load(std::memory_order_acquire) && !destroyed_.load() &&
      next_seq_.compare_exchange_strong(expected, done + 2)) {
    sig.seq = done + 1;
    if (destroyed_.load()) {  // destroy() began meanwhile: give the turn back
      finish_turn(sig.seq);
      std::lock_guard lock(mu_);
      check_usable_locked();
    }
  } else {
    wait_for_turn(sig, deadline);
  }
  std::exception_ptr error = execute(sig, deadline, segment_bytes, body, verdict);
  finish_turn(sig.seq);
  if (error) std::rethrow_exception(error);
}

void Communicator::wait_for_turn(CallSignature& sig, const Deadline& deadline) {
  std::unique_lock lock(mu_);
  assign_seq_locked(sig);
  // Earlier asynchronous calls run first; each is bounded by its own deadline.
  ++turn_waiters_;
  bool timed_out = false;
  while (executed_seq_.load() + 1 != sig.seq && !timed_out)
    timed_out = turn_cv_.wait_until(lock, deadline.time_point()) == std::cv_status::timeout &&
                executed_seq_.load() + 1 != sig.seq;
  --turn_waiters_;
  if (!timed_out) return;
  // This call can never run in order now: the communicator is unusable.
  std::string message = fmt::format("rank {}: {} timed out waiting for earlier calls to finish",
                                    rank(), describe(sig));
  lock.unlock();
  fail(CHORUS_ERR_TIMEOUT, message);
  // A stand-in goes to the worker (queue kept in sequence order) so that the
  // turn still advances past this call; aborted, it fails at once.
  lock.lock();
  const uint64_t seq = sig.seq;
  auto pos = std::find_if(queue_.begin(), queue_.end(),
                          [seq](const WorkPtr& w) { return w->sig_.seq > seq; });
  queue_.insert(pos, std::make_shared<Work>(sig, 0, nullptr));
  ++queued_;
  work_cv_.notify_one();
  throw IoError(CHORUS_ERR_TIMEOUT, message);
}

WorkPtr Communicator::run_async(CallSignature sig, std::size_t segment_bytes, Work::Body body,
                                VerdictPlan verdict) {
  auto work = std::make_shared<Work>(sig, segment_bytes, std::move(body), verdict);
  std::lock_guard lock(mu_);
  assign_seq_locked(work->sig_);
  queue_.push_back(work);
  ++queued_;
  work_cv_.notify_one();
  return work;
}

void Communicator::worker_loop() {
  std::unique_lock lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_worker_ || front_ready_locked(); });
    if (stop_worker_ && queue_.empty()) return;
    if (!front_ready_locked()) continue;
    WorkPtr work = pop_front_locked();
    lock.unlock();
    run_queued(*work);
    lock.lock();
  }
}

bool Communicator::front_ready_locked() const {
  return !queue_.empty() && executed_seq_.load() + 1 == queue_.front()->sig_.seq;
}

WorkPtr Communicator::pop_front_locked() {
  WorkPtr work = queue_.front();
  queue_.pop_front();
  --queued_;
  return work;
}

void Communicator::run_queued(Work& work) {
  // Asynchronous calls get CHORUS_TIMEOUT from the moment they start.
  std::exception_ptr error =
      execute(work.sig_, default_deadline(), work.segment_bytes_, work.body_, work.verdict_);
  work.body_ = nullptr;  // drop captured state now, not when the handle dies
  if (error)
    work.completion().fail(error);
  else
    work.completion().complete();
  finish_turn(work.sig_.seq);
}

void Communicator::run_queued_until(const Work& work) {
  std::unique_lock lock(mu_);
  while (!work.completion().done() && front_ready_locked()) {
    WorkPtr next = pop_front_locked();
    lock.unlock();
    run_queued(*next);
    if (next.get() == &work) return;
    lock.lock();
  }
}

template <typename Body>
std::exception_ptr Communicator::execute(const CallSignature& sig, const Deadline& deadline,
                                         std::size_t segment_bytes, const Body& body,
                                         const VerdictPlan& verdict) {
  if (aborted_.load(std::memory_order_acquire)) {  // no lock on the common path
    std::string earlier_abort;
    {
      std::lock_guard lock(mu_);
      earlier_abort = abort_reason_;
    }
    return io_error(CHORUS_ERR_ABORTED,
                    fmt::format("communicator was aborted earlier: {}", earlier_abort));
  }
  CollectiveContext ctx =
      CollectiveContext::over(world_, scratch_, sig, deadline, segment_bytes, wait_spin());
  ctx.whole_call = true;
  ctx.ring_round_bytes = ring_round_bytes_;
  CallBoard::Slot& board = *progress_;
  board.enter(sig);
  bool started = false;  // past the first check: peers may have finished it
  const bool round = verdict.round;
  const auto& result = verdict.keep;
  try {
    // The connections may have failed under a split relative (an abort, a
    // dead peer it saw): then this call fails too, before it starts.
    link_->transport->check_call(world_.tag, sig);
    started = true;
    body(ctx);
    // Kept before the part is marked done: a survivor that asks about this
    // call once it is marked finds the result (recover.hpp).
    if (result) board.keep(sig, *result);
    // A peer may have sealed this rank's part first: one whose deadline
    // passed while it waited on this rank (CollectiveContext::wait), one
    // that failed the call and asked for a result, or one cut off from this
    // rank (tcp_probe.cpp). Then this rank fails the call as that peer does,
    // and takes no part in the round.
    mark_part_done(*link_->transport, board, world_.tag, sig);
    if (round) agree_on_verdict(ctx);
    board.leave(sig, true);
    return nullptr;
  } catch (const Error& e) {
    // No peer finishes a call this rank never started (each needs its part).
    // A deadline that passed here may have passed after every peer got this
    // rank's part: one of them may have finished the call too.
    if (result && started && !round &&
        (e.code() == CHORUS_ERR_PEER_FAILURE || e.code() == CHORUS_ERR_TIMEOUT) &&
        recovered_from_survivor(sig, *result, e.code(), e.what()))
      return nullptr;
    comm_log().error("rank {}: {} failed: {}", rank(), describe(sig), e.what());
    board.leave(sig, false);
    fail(e.code(), e.what());
    const std::string message = with_local_ranks(e.what());
    if (dynamic_cast<const IoError*>(&e)) return io_error(e.code(), message);
    if (dynamic_cast<const UsageError*>(&e))
      return std::make_exception_ptr(UsageError(e.code(), message));
    return std::make_exception_ptr(InvariantError(message));
  } catch (const std::exception& e) {
    std::string message = fmt::format("{} failed: {}", describe(sig), e.what());
    board.leave(sig, false);
    fail(CHORUS_ERR_INTERNAL, message);
    return std::make_exception_ptr(InvariantError(message));
  }
}

VerdictPlan Communicator::verdict_for(const CollectiveCall& call, const CallShape& shape,
                                      const AlgorithmSpec& algo, const CallSignature& sig) const {
  return plan_verdict(config_, call, shape, algo.one_verdict, algo.commit_point,
                      sig.count * dtype_size(static_cast<DataType>(sig.dtype)), size());
}

bool Communicator::recovered_from_survivor(const CallSignature& sig, std::span<std::byte> result,
                                           chorus_result_t code, const std::string& why) {
  std::vector<int> peers;
  for (int r = 0; r < size(); ++r)
    if (r != rank()) peers.push_back(world_.member(r));
  const int from = link_->transport->recover_result(world_.tag, sig, peers, result, code);
  if (from < 0) return false;
  CallBoard::Slot& board = *progress_;
  board.keep(sig, result);  // for a survivor that asks this rank in turn
  board.leave(sig, true);
  comm_log().warn("rank {}: {} failed here ({}), but rank {} had finished it: its result is taken",
                  rank(), describe(sig), why, world_.index_of(from));
  // The peers this rank asked are sealed: none takes part in a later call.
  // A dead peer failed the communicator already; after a deadline it fails
  // here, sparing this call, with the deadline's message for later calls.
  if (code == CHORUS_ERR_TIMEOUT)
    fail(code, fmt::format("rank {}: {} (its result was then taken from rank {})", rank(), why,
                           world_.index_of(from)));
  return true;
}

void Communicator::finish_turn(uint64_t seq) {
  executed_seq_.store(seq);
  // Wake only who can use it: an idle worker or a blocking caller costs a
  // futex call and a context switch per collective.
  if (turn_waiters_.load() == 0 && queued_.load() == 0) return;
  std::lock_guard lock(mu_);
  if (turn_waiters_.load() > 0) turn_cv_.notify_all();
  if (!queue_.empty()) work_cv_.notify_one();
}

// The ring pipelines' segment size for a call of `bytes` (CallShape::bytes).
std::size_t Communicator::segment_bytes_for(std::size_t bytes) const {
  return ring_segment_bytes(bytes, size(), cost_model_, config_.segment_bytes);
}

void Communicator::abort(const std::string& reason) {
  fail(CHORUS_ERR_ABORTED,
       fmt::format("rank {} aborted: {}", rank(), reason.empty() ? "aborted by the user" : reason));
}

void Communicator::fail(chorus_result_t code, const std::string& message) {
  {
    std::lock_guard lock(mu_);
    if (abort_reason_.empty()) abort_reason_ = message;
    aborted_.store(true, std::memory_order_release);
  }
  link_->transport->fail(code, message, link_->transport->board().spared());
}

void Communicator::destroy() {
  std::unique_lock lock(mu_);
  if (destroyed_.load()) return;
  // Refuses new calls first: a blocking call that took its turn without mu_
  // either sees this or is outstanding below.
  destroyed_.store(true);
  // Outstanding work finishes first, bounded by CHORUS_TIMEOUT.
  auto deadline = default_deadline();
  ++turn_waiters_;
  while (executed_seq_.load() + 1 != next_seq_.load()) {
    if (turn_cv_.wait_until(lock, deadline.time_point()) == std::cv_status::timeout &&
        executed_seq_.load() + 1 != next_seq_.load()) {
      lock.unlock();
      fail(CHORUS_ERR_TIMEOUT,
           fmt::format("rank {}: destroyed while collectives were still outstanding after {} s",
                       rank(), config_.timeout_s));
      lock.lock();
      break;
    }
  }
  --turn_waiters_;
  stop_worker_ = true;
  work_cv_.notify_all();
  lock.unlock();
  if (worker_.joinable()) worker_.join();
  // The connections go with the last communicator of the link (split
  // relatives share them).
  if (link_->users.fetch_sub(1) == 1) link_->transport->close();
}

// --- calls --------------------------------------------------------------

void Communicator::check_usable() {
  if (destroyed_.load() || aborted_.load(std::memory_order_acquire)) {
    std::lock_guard lock(mu_);
    check_usable_locked();
  }
}

// Every rank derives the same choice from the same inputs; the algorithm is
// part of the signature, so ranks configured differently fail as a mismatch.
const AlgorithmSpec& Communicator::choose(const CollectiveCall& call, const CallShape& shape,
                                          CallSignature& sig) {
  const auto k = static_cast<std::size_t>(call.kind);
  // The call the algorithm runs (a compressed allreduce's: the wire dtype).
  const uint64_t key = shape.bytes < (uint64_t(1) << 47)
                           ? (uint64_t(shape.bytes) << 16) | (uint64_t(call.dtype) << 8) | sig.op
                           : kNoChoice;
  if (key != kNoChoice && cache_key_[k].load() == key) {
    const uint8_t id = cache_id_[k].load();
    if (cache_key_[k].load() == key) {
      sig.algo = id;
      return *algorithm_by_id(id);
    }
  }
  const bool debug = comm_log().should_log(spdlog::level::debug);
  Selection s = select_algorithm(call, shape.bytes, world_, algo_override_, cost_model_, debug);
  if (debug) {
    const VerdictPlan verdict = plan_verdict(config_, call, shape, s.spec->one_verdict,
                                             s.spec->commit_point, shape.bytes, size());
    comm_log().debug("{} {} bytes: {} ({}); one verdict on a death: {}", collective_name(call.kind),
                     shape.bytes, s.spec->name, s,
                     s.spec->one_verdict ? "the algorithm's own" : describe(verdict));
  }
  cache_key_[k].store(kNoChoice);
  cache_id_[k].store(s.id);
  cache_key_[k].store(key);
  sig.algo = s.id;
  return *s.spec;
}

Selection Communicator::explain(const CollectiveCall& call) const {
  const CallShape shape = validate(call, rank(), size());
  return select_algorithm(call, shape.bytes, world_, algo_override_, cost_model_, true);
}

void Communicator::set_algo_override(AlgoOverride user) {
  // The hierarchy keeps a pointer to algo_override_: assigned in place.
  algo_override_ = std::move(user);
  for (auto& k : cache_key_) k.store(kNoChoice);
}

void Communicator::run(const CollectiveCall& call, const Deadline& deadline) {
  const CallShape shape = validate(call, rank(), size());
  if (call.scattered) {
    run_parts(call, shape, deadline);
    return;
  }
  if (auto wire = wire_dtype_of(call, config_.wire_dtype, size())) {
    WirePlan plan = plan_wire(call, *wire, size());
    const AlgorithmSpec& algo = choose(plan.inner, plan.shape, plan.sig);
    run_blocking(
        plan.sig, deadline, segment_bytes_for(plan.shape.bytes),
        [&](CollectiveContext& ctx) { run_wire_allreduce(ctx, algo, call, plan); },
        verdict_for(call, shape, algo, plan.sig));
    return;
  }
  CallSignature sig = signature_of(call, size(), shape);
  const AlgorithmSpec& algo = choose(call, shape, sig);
  run_blocking(
      sig, deadline, segment_bytes_for(shape.bytes),
      [&](CollectiveContext& ctx) { algo.run(ctx, call, shape); },
      verdict_for(call, shape, algo, sig));
}

// The call in parts runs as the same call in one buffer would: the same
// algorithm and the same verdict plan on every rank, whichever form each
// rank's buffers take. Parts are read where they lie when the algorithm
// takes them and the plan keeps no result for survivors (a result kept is
// one span); otherwise they are packed around the call.
const AlgorithmSpec* Communicator::parts_reader(const CollectiveCall& call, const CallShape& shape,
                                                CallSignature& sig, VerdictPlan& verdict) {
  if (wire_dtype_of(call, config_.wire_dtype, size())) return nullptr;
  sig = signature_of(call, size(), shape);
  const AlgorithmSpec& algo = choose(call, shape, sig);
  // (A kept result would be one span at call.recv, which a call in parts
  // lacks: only whether one is kept matters here.)
  verdict = verdict_for(call, shape, algo, sig);
  return algo.takes_parts && !verdict.keep ? &algo : nullptr;
}

bool Communicator::reads_parts(const CollectiveCall& call) {
  CallShape shape;
  shape.elem = dtype_size(call.dtype);
  shape.bytes = call.count * shape.elem;
  CallSignature sig;
  VerdictPlan verdict;
  return parts_reader(call, shape, sig, verdict) != nullptr;
}

void Communicator::run_parts(const CollectiveCall& call, const CallShape& shape,
                             const Deadline& deadline) {
  const ScatteredBuffers& parts = *call.scattered;
  CallSignature sig;
  VerdictPlan verdict;
  if (const AlgorithmSpec* algo = parts_reader(call, shape, sig, verdict)) {
    run_blocking(
        sig, deadline, segment_bytes_for(shape.bytes),
        [&](CollectiveContext& ctx) { algo->run(ctx, call, shape); }, verdict);
    return;
  }
  std::byte* packed = packed_parts_.get(0, shape.bytes).data();
  parts.pack(packed);
  CollectiveCall whole = call;
  whole.scattered = nullptr;
  whole.send = whole.recv = packed;
  run(whole, deadline);
  parts.unpack(packed);
}

WorkPtr Communicator::submit(const CollectiveCall& call) {
  const CallShape shape = validate(call, rank(), size());
  if (call.scattered)
    throw InvariantError(fmt::format("{}: an allreduce in parts runs blocking only",
                                     describe(signature_of(call, size(), shape))));
  if (auto wire = wire_dtype_of(call, config_.wire_dtype, size())) {
    auto plan = std::make_shared<WirePlan>(plan_wire(call, *wire, size()));
    const AlgorithmSpec* algo = &choose(plan->inner, plan->shape, plan->sig);
    const CallSignature wire_sig = plan->sig;
    const VerdictPlan verdict = verdict_for(call, shape, *algo, wire_sig);
    const std::size_t segment = segment_bytes_for(plan->shape.bytes);
    // Moved, not copied, into the body: the worker, which drops the body
    // after running it, then releases the plan on the thread that read it.
    return run_async(
        wire_sig, segment,
        [call, plan = std::move(plan), algo](CollectiveContext& ctx) {
          run_wire_allreduce(ctx, *algo, call, *plan);
        },
        verdict);
  }
  CallSignature sig = signature_of(call, size(), shape);
  const AlgorithmSpec* algo = &choose(call, shape, sig);
  // The call outlives the caller's arguments: the v-variants' counts are copied.
  std::shared_ptr<std::vector<std::size_t>> counts;
  CollectiveCall kept = call;
  if (call.is_v()) {
    counts = std::make_shared<std::vector<std::size_t>>(call.counts, call.counts + size());
    kept.counts = counts->data();
  }
  // Moved into the body for the same reason as the plan above: a copy kept
  // here would be released on this thread after the worker had run the call
  // (ThreadSanitizer reported the vector's delete racing the worker's reads).
  return run_async(
      sig, segment_bytes_for(shape.bytes),
      [kept, shape, algo, counts = std::move(counts)](CollectiveContext& ctx) {
        algo->run(ctx, kept, shape);
      },
      verdict_for(call, shape, *algo, sig));
}

// "rank 3" in a message from the transport is the job's (transport) rank;
// in a split communicator the user knows ranks by their place here.
std::string Communicator::with_local_ranks(const std::string& message) const {
  bool identity = true;
  for (int i = 0; i < size() && identity; ++i) identity = world_.member(i) == i;
  if (identity) return message;
  static const std::regex mentioned("rank(?:\\(s\\))? (\\d+)");
  std::set<int> seen;
  for (auto it = std::sregex_iterator(message.begin(), message.end(), mentioned);
       it != std::sregex_iterator(); ++it)
    seen.insert(std::stoi((*it)[1]));
  std::string map;
  for (int global : seen) {
    const int local = world_.index_of(global);
    map += map.empty() ? "" : ", ";
    map += local >= 0 ? fmt::format("job rank {} is rank {}", global, local)
                      : fmt::format("job rank {} is not a member", global);
  }
  if (map.empty()) return message;
  return fmt::format("{} [ranks above are job ranks; in {} (split): {}]", message, name_, map);
}

}  // namespace chorus
