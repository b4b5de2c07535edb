#include "lib/comm/communicator.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "collectives/allgather/ring.hpp"
#include "collectives/allgather/shm.hpp"
#include "collectives/allreduce/recursive_doubling.hpp"
#include "collectives/allreduce/ring.hpp"
#include "collectives/allreduce/shm.hpp"
#include "collectives/barrier/dissemination.hpp"
#include "collectives/barrier/shm.hpp"
#include "collectives/broadcast/ring.hpp"
#include "collectives/broadcast/shm.hpp"
#include "collectives/common/validate.hpp"
#include "collectives/reduce_scatter/ring.hpp"
#include "collectives/reduce_scatter/shm.hpp"
#include "base/core/error.hpp"
#include "base/core/log.hpp"

namespace chorus {
namespace {

spdlog::logger& log() {
  static spdlog::logger& subsystem = logger("comm");  // the registry locks a mutex
  return subsystem;
}

std::chrono::nanoseconds seconds(double s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

// Bytes of count * multiplier elements, refusing overflow (collectives/common/validate.hpp).
std::size_t checked_bytes(std::size_t count, DataType dtype, std::size_t multiplier,
                          const char* what) {
  std::size_t elem = dtype_size(dtype);
  return checked_total(count, static_cast<int>(multiplier), elem, what) * elem;
}

void check_buffer(const void* p, std::size_t bytes, const char* name, const char* what) {
  if (bytes > 0 && p == nullptr)
    throw UsageError(fmt::format("{}: {} is NULL with a non-zero count", what, name));
}

void check_dtype_op(int dtype, int op, const char* what, bool has_op) {
  if (!valid_dtype(dtype)) throw UsageError(fmt::format("{}: unknown dtype {}", what, dtype));
  if (has_op && !valid_op(op))
    throw UsageError(fmt::format("{}: unknown reduction op {}", what, op));
}

CallSignature signature(CollectiveKind kind, std::size_t count, DataType dtype, ReduceOp op,
                        int64_t root) {
  CallSignature sig;
  sig.kind = static_cast<uint8_t>(kind);
  sig.count = count;
  sig.dtype = static_cast<uint8_t>(dtype);
  sig.op = static_cast<uint8_t>(op);
  sig.root = root;
  return sig;
}

}  // namespace

Communicator::Communicator(std::unique_ptr<Transport> transport, std::shared_ptr<void> keepalive,
                           const Config& config, int ranks_on_host, int cpus_on_host, uint32_t tag,
                           std::unique_ptr<shm::Domain> shm)
    : transport_(std::move(transport)),
      shm_(std::move(shm)),
      keepalive_(std::move(keepalive)),
      config_(config),
      tag_(tag),
      algo_override_(AlgoOverride::parse(config.algo)),
      default_timeout_(seconds(config.timeout_s)) {
  if (ranks_on_host <= 0) ranks_on_host = size();
  config_.spin_us = resolve_spin_us(config_.spin_us);
  if (cpus_on_host <= 0) cpus_on_host = online_cores();
  cost_model_ = CostModel::defaults(ranks_on_host, cpus_on_host);
  worker_ = std::thread([this] { worker_loop(); });
}

Communicator::~Communicator() {
  try {
    destroy();
  } catch (const std::exception& e) {
    log().warn("rank {}: error while destroying the communicator: {}", rank(), e.what());
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
void Communicator::run_blocking(CallSignature sig, const Deadline& deadline, const Body& body) {
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
  std::exception_ptr error = execute(sig, deadline, body);
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
  abort(message);
  // A stand-in goes to the worker (queue kept in sequence order) so that the
  // turn still advances past this call; aborted, it fails at once.
  lock.lock();
  const uint64_t seq = sig.seq;
  auto pos = std::find_if(queue_.begin(), queue_.end(),
                          [seq](const WorkPtr& w) { return w->sig_.seq > seq; });
  queue_.insert(pos, std::make_shared<Work>(sig, nullptr));
  ++queued_;
  work_cv_.notify_one();
  throw IoError(CHORUS_ERR_TIMEOUT, message);
}

WorkPtr Communicator::run_async(CallSignature sig, Work::Body body) {
  auto work = std::make_shared<Work>(sig, std::move(body));
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
  std::exception_ptr error = execute(work.sig_, default_deadline(), work.body_);
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
                                         const Body& body) {
  if (aborted_.load(std::memory_order_acquire)) {  // no lock on the common path
    std::string earlier_abort;
    {
      std::lock_guard lock(mu_);
      earlier_abort = abort_reason_;
    }
    return io_error(CHORUS_ERR_ABORTED,
                    fmt::format("communicator was aborted earlier: {}", earlier_abort));
  }
  CollectiveContext ctx{*transport_,
                        scratch_,
                        tag_,
                        sig,
                        deadline,
                        segment_bytes_for(sig),
                        Spin{config_.spin_us, cost_model_.oversubscribed},
                        shm_.get()};
  try {
    body(ctx);
    return nullptr;
  } catch (const Error& e) {
    log().error("rank {}: {} failed: {}", rank(), describe(sig), e.what());
    abort(e.what());
    return std::current_exception();
  } catch (const std::exception& e) {
    std::string message = fmt::format("{} failed: {}", describe(sig), e.what());
    abort(message);
    return std::make_exception_ptr(InvariantError(message));
  }
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

// The ring pipelines' segment size for this call (per-rank buffer bytes).
std::size_t Communicator::segment_bytes_for(const CallSignature& sig) const {
  auto kind = static_cast<CollectiveKind>(sig.kind);
  std::size_t ranks_factor =
      kind == CollectiveKind::allgather || kind == CollectiveKind::reduce_scatter ? size() : 1;
  std::size_t bytes = sig.count * dtype_size(static_cast<DataType>(sig.dtype)) * ranks_factor;
  return ring_segment_bytes(bytes, size(), cost_model_, config_.segment_bytes);
}

void Communicator::abort(const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    if (abort_reason_.empty()) abort_reason_ = reason.empty() ? "aborted by the user" : reason;
    aborted_.store(true, std::memory_order_release);
  }
  transport_->abort(reason);
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
      abort("destroyed while collectives were still outstanding");
      lock.lock();
      break;
    }
  }
  --turn_waiters_;
  stop_worker_ = true;
  work_cv_.notify_all();
  lock.unlock();
  if (worker_.joinable()) worker_.join();
  transport_->close();
}

// --- calls --------------------------------------------------------------

// Every rank derives the same choice from the same inputs; the algorithm is
// part of the signature, so ranks configured differently fail as a mismatch.
Algorithm Communicator::choose(CallSignature& sig, std::size_t bytes) {
  auto kind = static_cast<CollectiveKind>(sig.kind);
  AlgoChoice choice =
      choose_algorithm(kind, bytes, size(), algo_override_, cost_model_, shm_ != nullptr);
  sig.algo = static_cast<uint8_t>(1 + algorithm_index(kind, choice.algo));
  if (log().should_log(spdlog::level::debug))
    log().debug("{} {} bytes: {} ({})", collective_name(kind), bytes, choice.algo, choice);
  return choice.algo;
}

template <typename Run>
decltype(auto) Communicator::allreduce_call(const void* send, void* recv, std::size_t count,
                                            DataType dtype, ReduceOp op, Run&& run) {
  check_dtype_op(static_cast<int>(dtype), static_cast<int>(op), "allreduce", true);
  std::size_t bytes = checked_bytes(count, dtype, 1, "allreduce");
  check_buffer(send, bytes, "sendbuf", "allreduce");
  check_buffer(recv, bytes, "recvbuf", "allreduce");
  if (send != recv && overlaps(send, bytes, recv, bytes))
    throw UsageError("allreduce: sendbuf and recvbuf overlap without being the same buffer");
  auto sig = signature(CollectiveKind::allreduce, count, dtype, op, -1);
  const Algorithm algo = choose(sig, bytes);
  return run(sig, [=](CollectiveContext& ctx) {
    switch (algo) {
      case Algorithm::shm:
        return shm_allreduce(ctx, send, recv, count, dtype, op);
      case Algorithm::recursive_doubling:
        return recursive_doubling_allreduce(ctx, send, recv, count, dtype, op);
      default:
        return ring_allreduce(ctx, send, recv, count, dtype, op);
    }
  });
}

template <typename Run>
decltype(auto) Communicator::broadcast_call(void* buf, std::size_t count, DataType dtype, int root,
                                            Run&& run) {
  check_dtype_op(static_cast<int>(dtype), 0, "broadcast", false);
  std::size_t bytes = checked_bytes(count, dtype, 1, "broadcast");
  check_buffer(buf, bytes, "buf", "broadcast");
  if (root < 0 || root >= size())
    throw UsageError(fmt::format("broadcast: root {} is not a rank of {}", root, size()));
  auto sig = signature(CollectiveKind::broadcast, count, dtype, ReduceOp::sum, root);
  const bool shm = choose(sig, bytes) == Algorithm::shm;
  return run(sig, [=](CollectiveContext& ctx) {
    if (shm)
      shm_broadcast(ctx, buf, count, dtype, root);
    else
      ring_broadcast(ctx, buf, count, dtype, root);
  });
}

template <typename Run>
decltype(auto) Communicator::allgather_call(const void* send, void* recv, std::size_t sendcount,
                                            DataType dtype, Run&& run) {
  check_dtype_op(static_cast<int>(dtype), 0, "allgather", false);
  std::size_t bytes = checked_bytes(sendcount, dtype, 1, "allgather");
  std::size_t total =
      checked_bytes(sendcount, dtype, static_cast<std::size_t>(size()), "allgather");
  check_buffer(send, bytes, "sendbuf", "allgather");
  check_buffer(recv, total, "recvbuf", "allgather");
  bool in_place = send == static_cast<const std::byte*>(recv) + bytes * rank();
  if (!in_place && overlaps(send, bytes, recv, total))
    throw UsageError(
        "allgather: sendbuf overlaps recvbuf (in place means sendbuf == recvbuf + "
        "rank * sendcount)");
  auto sig = signature(CollectiveKind::allgather, sendcount, dtype, ReduceOp::sum, -1);
  const bool shm = choose(sig, total) == Algorithm::shm;
  return run(sig, [=](CollectiveContext& ctx) {
    if (shm)
      shm_allgather(ctx, send, recv, sendcount, dtype);
    else
      ring_allgather(ctx, send, recv, sendcount, dtype);
  });
}

template <typename Run>
decltype(auto) Communicator::reduce_scatter_call(const void* send, void* recv,
                                                 std::size_t recvcount, DataType dtype, ReduceOp op,
                                                 Run&& run) {
  check_dtype_op(static_cast<int>(dtype), static_cast<int>(op), "reduce_scatter", true);
  std::size_t bytes = checked_bytes(recvcount, dtype, 1, "reduce_scatter");
  std::size_t total =
      checked_bytes(recvcount, dtype, static_cast<std::size_t>(size()), "reduce_scatter");
  check_buffer(send, total, "sendbuf", "reduce_scatter");
  check_buffer(recv, bytes, "recvbuf", "reduce_scatter");
  bool in_place = recv == static_cast<const std::byte*>(send) + bytes * rank();
  if (!in_place && overlaps(send, total, recv, bytes))
    throw UsageError(
        "reduce_scatter: recvbuf overlaps sendbuf (in place means recvbuf == "
        "sendbuf + rank * recvcount)");
  auto sig = signature(CollectiveKind::reduce_scatter, recvcount, dtype, op, -1);
  const bool shm = choose(sig, total) == Algorithm::shm;
  return run(sig, [=](CollectiveContext& ctx) {
    if (shm)
      shm_reduce_scatter(ctx, send, recv, recvcount, dtype, op);
    else
      ring_reduce_scatter(ctx, send, recv, recvcount, dtype, op);
  });
}

template <typename Run>
decltype(auto) Communicator::barrier_call(Run&& run) {
  auto sig = signature(CollectiveKind::barrier, 0, DataType::u8, ReduceOp::sum, -1);
  const bool shm = choose(sig, 0) == Algorithm::shm;
  return run(sig, [shm](CollectiveContext& ctx) {
    if (shm)
      shm_barrier(ctx);
    else
      dissemination_barrier(ctx);
  });
}

auto Communicator::blocking(const Deadline& deadline) {
  return [this, &deadline](const CallSignature& sig, const auto& body) {
    run_blocking(sig, deadline, body);
  };
}

auto Communicator::async() {
  return [this](const CallSignature& sig, auto body) { return run_async(sig, std::move(body)); };
}

void Communicator::allreduce(const void* send, void* recv, std::size_t count, DataType dtype,
                             ReduceOp op, const Deadline& deadline) {
  allreduce_call(send, recv, count, dtype, op, blocking(deadline));
}
void Communicator::broadcast(void* buf, std::size_t count, DataType dtype, int root,
                             const Deadline& deadline) {
  broadcast_call(buf, count, dtype, root, blocking(deadline));
}
void Communicator::allgather(const void* send, void* recv, std::size_t sendcount, DataType dtype,
                             const Deadline& deadline) {
  allgather_call(send, recv, sendcount, dtype, blocking(deadline));
}
void Communicator::reduce_scatter(const void* send, void* recv, std::size_t recvcount,
                                  DataType dtype, ReduceOp op, const Deadline& deadline) {
  reduce_scatter_call(send, recv, recvcount, dtype, op, blocking(deadline));
}
void Communicator::barrier(const Deadline& deadline) {
  barrier_call(blocking(deadline));
}

WorkPtr Communicator::iallreduce(const void* send, void* recv, std::size_t count, DataType dtype,
                                 ReduceOp op) {
  return allreduce_call(send, recv, count, dtype, op, async());
}
WorkPtr Communicator::ibroadcast(void* buf, std::size_t count, DataType dtype, int root) {
  return broadcast_call(buf, count, dtype, root, async());
}
WorkPtr Communicator::iallgather(const void* send, void* recv, std::size_t sendcount,
                                 DataType dtype) {
  return allgather_call(send, recv, sendcount, dtype, async());
}
WorkPtr Communicator::ireduce_scatter(const void* send, void* recv, std::size_t recvcount,
                                      DataType dtype, ReduceOp op) {
  return reduce_scatter_call(send, recv, recvcount, dtype, op, async());
}
WorkPtr Communicator::ibarrier() {
  return barrier_call(async());
}

}  // namespace chorus
