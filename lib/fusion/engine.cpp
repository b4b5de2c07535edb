#include "lib/fusion/engine.hpp"

#include <fmt/format.h>

#include <pthread.h>
#include <algorithm>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "base/core/wait_policy.hpp"
#include "collectives/registry.hpp"
#include "lib/fusion/engine_parts.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace chorus::fusion {
namespace {

// The round period of a rank with nothing pending: it still joins the
// rounds of ranks that have something (their stall and timeout verdicts
// need it), but does not wake, and take the cores of the peers' compute or
// collectives, every cycle (measured: docs/architecture.md, "When").
constexpr auto kIdleCycle = std::chrono::milliseconds(10);

// The bucket's tensors lie back to back in memory, in bucket order, all in
// place or all with back-to-back outputs apart from the inputs: one
// allreduce on the user's memory serves, with no copy (what DDP's
// gradient_as_bucket_view arranges). Each rank decides for itself: the
// collective is the same either way.
bool adjacent(std::span<FusedTensor* const> tensors, std::size_t bytes) {
  for (std::size_t i = 1; i < tensors.size(); ++i)
    if (!lies_after(*tensors[i - 1], *tensors[i])) return false;
  const auto* send = static_cast<const std::byte*>(tensors.front()->send);
  const auto* recv = static_cast<const std::byte*>(tensors.front()->recv);
  return send == recv || recv + bytes <= send || send + bytes <= recv;
}

// Every rank comes to the same answer: the algorithm a size selects, and
// whether it takes parts, are the same everywhere.
std::size_t alone_bytes_for(const EngineOptions& options, Communicator& comm) {
  if (options.alone_bytes) return *options.alone_bytes;
  CollectiveCall largest = allreduce_call({options.fusion_bytes / 4, DataType::f32, ReduceOp::sum},
                                          nullptr, nullptr, options.fusion_bytes / 4);
  largest.wire = options.wire;
  const bool in_place = comm.reads_parts(largest);
  fusion_log().debug("rank {}: a bucket's tensors are {}: tensors of {} or more go alone",
                     comm.rank(), in_place ? "reduced where they lie" : "packed",
                     in_place ? "no size" : fmt::format("{} bytes", kPackedAloneBytes));
  return in_place ? SIZE_MAX : kPackedAloneBytes;
}

}  // namespace

std::size_t Engine::NameHash::operator()(std::string_view name) const noexcept {
  return static_cast<std::size_t>(XXH3_64bits(name.data(), name.size()));
}

EngineOptions EngineOptions::from(const Config& config) {
  EngineOptions o;
  o.cycle_ms = config.fusion_cycle_ms;
  o.fusion_bytes = config.fusion_bytes;
  o.alone_bytes = config.fusion_alone;
  o.stall_s = config.fusion_stall_s;
  o.cache = static_cast<std::size_t>(config.fusion_cache);
  o.timeout_s = config.timeout_s;
  o.timeline = config.timeline;
  return o;
}

Engine::Engine(MakeComm make_comm, int rank, int size, EngineOptions options)
    : rank_(rank),
      size_(size),
      options_(std::move(options)),
      make_comm_(std::move(make_comm)),
      known_(options_.cache),
      timeline_(options_.timeline, rank),
      timed_(timeline_.enabled()),
      names_limit_(std::max<std::size_t>(4096, 2 * options_.cache)) {
  thread_ = std::thread([this] { main(); });
}

Engine::~Engine() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    fusion_log().warn("rank {}: fusion engine shutdown: {}", rank_, e.what());
  }
}

Deadline Engine::deadline() const {
  return Deadline::after(seconds(options_.timeout_s));
}

FusedPtr Engine::submit(std::string_view name, TensorShape shape, const void* send, void* recv) {
  auto tensor = std::make_shared<FusedTensor>();
  tensor->shape = shape;
  tensor->send = send;
  tensor->recv = recv;
  submit(name, tensor);
  return tensor;
}

void Engine::submit(std::string_view name, FusedPtr tensor) {
  const TensorShape& shape = tensor->shape;
  // The timeline wants the precise time of submission; stall and timeout
  // checks make do with the engine's intake (main()), one clock read a cycle.
  if (timed_) tensor->submitted = Clock::now();
  std::lock_guard lock(mu_);
  if (stopped_) {
    const TensorSpec spec{std::string(name), shape.count, shape.dtype, shape.op};
    std::rethrow_exception(naming(stopped_, {&spec, 1}));
  }
  if (shutdown_requested_)
    throw UsageError(CHORUS_ERR_INVALID_USAGE, "fused allreduce: the fusion engine is stopping");
  NameSlot* slot = last_submitted_ ? last_submitted_->next : nullptr;
  if (!slot || slot->name != name) {
    auto it = names_.find(name);
    if (it == names_.end()) {
      auto made = std::make_unique<NameSlot>(name);
      it = names_.emplace(made->name, std::move(made)).first;
    }
    slot = it->second.get();
  }
  if (slot->outstanding)
    throw UsageError(fmt::format(
        "fused allreduce: tensor '{}' is already pending on rank {} (a name is submitted again "
        "only once its request has finished)",
        name, rank_));
  if (last_submitted_) last_submitted_->next = slot;
  last_submitted_ = slot;
  tensor->slot = slot;
  slot->outstanding = true;
  const bool first = outstanding_count_++ == 0;
  outstanding_bytes_ += shape.bytes();
  incoming_.push_back(std::move(tensor));
  if (first) outstanding_since_ = Clock::now();
  // Only the first submission wakes the engine's thread, which sleeps for
  // the idle period until then: a cycle is due CHORUS_FUSION_CYCLE_MS after
  // it. A step whose every known name is in (trigger_) is due at once, but
  // waking the thread for it costs a wake-up and two switches of the core
  // per step (measured: 1000 tensors a step, 2 ranks, 9-10 us of 107), and
  // the thread that waits for its tensors runs the cycle itself
  // (run_due_cycle) or wakes the engine's thread (kick).
  if (triggered_locked()) trigger_ = true;
  if (first) cv_.notify_one();
}

void Engine::kick() {
  std::lock_guard lock(mu_);
  if (trigger_ && !kicked_) {
    kicked_ = true;
    cv_.notify_one();
  }
}

void Engine::forget_idle_names_locked() {
  last_submitted_ = nullptr;
  for (auto& entry : names_) entry.second->next = nullptr;
  std::erase_if(names_, [](const auto& entry) {
    return !entry.second->outstanding && entry.second->known_id < 0;
  });
  // Amortised: a table of live names that stays large is swept rarely.
  names_limit_ = std::max(names_limit_, 2 * names_.size());
}

// Every tensor known here, or a fused buffer's worth, is in: waiting for the
// cycle timer would only add latency.
bool Engine::triggered_locked() const {
  return (known_count_ > 0 && outstanding_count_ >= known_count_) ||
         outstanding_bytes_ >= options_.fusion_bytes;
}

void Engine::shutdown() {
  {
    std::lock_guard lock(mu_);
    shutdown_requested_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  timeline_.close();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

Clock::time_point Engine::due_locked(Clock::time_point last_end) const {
  if (outstanding_count_ == 0) return last_end + kIdleCycle;
  // A burst of submissions gets a cycle to gather before its round.
  return std::max(last_end, outstanding_since_) +
         std::chrono::duration_cast<Clock::duration>(
             std::chrono::duration<double, std::milli>(options_.cycle_ms));
}

void Engine::main() {
  {
    std::lock_guard cycle_lock(cycle_mu_);
    try {
      comm_ = make_comm_(deadline());
      alone_bytes_ = alone_bytes_for(options_, *comm_);
    } catch (...) {
      cycles_over_ = true;
      stop_with(std::current_exception());
      return;
    }
    last_end_ = Clock::now();
  }
  // Woken by a step's first submission, on a bound rank on the submitting
  // thread's own core, the engine's thread used to preempt it at once (to
  // set its timer, the cycle being usually run by the thread that then
  // waits): that took a 1000-tensor step from 76 to 100 us at 2 ranks over
  // shared memory, and a 1000 x 4 KiB step beside two spinning processes
  // from 0.50-0.53 to 2.0-6.1 ms (docs/benchmarks.md, "The engine's
  // wake-ups, runs and in-place stores").
  // A batch thread runs when the submitter blocks, yields or ends its slice,
  // and keeps an ordinary thread's share of a contended core.
  pthread_setname_np(pthread_self(), "chorus-fusion");  // for top -H, and the tests
  if (!become_batch_thread())
    fusion_log().debug("rank {}: the fusion engine's thread keeps its scheduling policy", rank_);
  for (;;) {
    Clock::time_point last_end;
    {
      std::lock_guard cycle_lock(cycle_mu_);
      if (cycles_over_) break;
      last_end = last_end_;
    }
    {
      // Due again after each wake-up: a first submission shortens the wait.
      std::unique_lock lock(mu_);
      while (!(trigger_ || shutdown_requested_ || cycles_over_)) {
        const auto due = due_locked(last_end);
        if (Clock::now() >= due) break;
        cv_.wait_until(lock, due);
      }
    }
    // A waiting thread may run a cycle meanwhile (run_due_cycle): then the
    // one due here may be due no more.
    std::lock_guard cycle_lock(cycle_mu_);
    if (cycles_over_) break;
    bool due_now;
    {
      std::lock_guard lock(mu_);
      due_now = trigger_ || shutdown_requested_ || Clock::now() >= due_locked(last_end_);
    }
    if (due_now) run_cycle_locked();
  }
  std::lock_guard cycle_lock(cycle_mu_);
  try {
    comm_->destroy();
  } catch (const std::exception& e) {
    fusion_log().debug("rank {}: fusion communicator destroy: {}", rank_, e.what());
  }
}

void Engine::run_due_cycle() {
  std::unique_lock cycle_lock(cycle_mu_, std::try_to_lock);
  if (!cycle_lock || cycles_over_ || !comm_) return;
  {
    std::lock_guard lock(mu_);
    if (!trigger_ || shutdown_requested_) return;
  }
  run_cycle_locked();
}

std::optional<std::string> Engine::name_if_pending(const FusedTensor& tensor) const {
  // A cycle forgets a name only at its start, under mu_, and only one whose
  // tensors were all completed by an earlier cycle.
  std::lock_guard lock(mu_);
  if (tensor.completion.done()) return std::nullopt;
  return tensor.name();
}

void Engine::run_cycle_locked() {
  {
    std::lock_guard lock(mu_);
    trigger_ = false;
    kicked_ = false;
    if (names_.size() >= names_limit_) forget_idle_names_locked();
    if (!timed_) {
      const auto intake = Deadline::coarse_now();
      for (const auto& t : incoming_) t->submitted = intake;
    }
    pending_.insert(pending_.end(), std::make_move_iterator(incoming_.begin()),
                    std::make_move_iterator(incoming_.end()));
    incoming_.clear();
  }
  bool go_on = false;
  try {
    go_on = cycle();
  } catch (...) {
    stop_with(std::current_exception());
  }
  last_end_ = Clock::now();
  if (!go_on) {
    cycles_over_ = true;
    std::lock_guard lock(mu_);
    cv_.notify_one();  // the engine's thread, if this is a waiting one, exits
  }
}

bool Engine::cycle() {
  Stop stop;
  std::vector<FusedTensor*> ready = negotiate(stop);
  execute(std::move(ready), Clock::now());
  if (stop.error) {
    stop_with(stop.error, stop.names_tensors);
    return false;
  }
  return true;
}

void Engine::execute(std::vector<FusedTensor*> ready, Clock::time_point agreed) {
  if (ready.empty()) return;
  const auto buckets = plan_buckets(
      ready, options_.fusion_bytes, alone_bytes_,
      [](const FusedTensor* t) -> const TensorShape& { return t->shape; },
      [](const FusedTensor* t) { return t->follows; });
  // Out of pending_ before any is done: a lent tensor may be freed as soon
  // as it is, so nothing here may touch it after.
  for (std::size_t i = 0; i < ready.size(); ++i) ready[i]->ready_index = static_cast<int64_t>(i);
  std::vector<FusedPtr> taken(ready.size());  // in ready's order
  std::size_t kept = 0;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    FusedPtr& t = pending_[i];
    if (t->ready_index >= 0) {
      taken[static_cast<std::size_t>(t->ready_index)] = std::move(t);
    } else {
      if (kept != i) pending_[kept] = std::move(t);
      ++kept;
    }
  }
  pending_.resize(kept);
  std::size_t finished = 0;  // ready[0, finished) are done
  try {
    for (const auto& bucket : buckets) {
      const std::span<FusedTensor* const> tensors(ready.data() + bucket.first, bucket.size());
      run_bucket(tensors, bucket.bytes, agreed);
      complete(tensors);
      finished = bucket.last;
    }
  } catch (...) {
    // The rest are pending still, for the engine's stop to fail them.
    for (std::size_t i = finished; i < taken.size(); ++i) pending_.push_back(std::move(taken[i]));
    throw;
  }
}

void Engine::run_bucket(std::span<FusedTensor* const> tensors, std::size_t bytes,
                        Clock::time_point agreed) {
  const TensorShape& first = tensors.front()->shape;
  const std::size_t elem = dtype_size(first.dtype);
  bool one_buffer = tensors.size() == 1;
  const bool timed = timeline_.enabled();
  if (timed)
    for (const auto& t : tensors) {
      const int track = timeline_.track(t->name());
      timeline_.instant(track, "submitted", t->submitted);
      timeline_.span(track, "negotiate", t->submitted, agreed);
    }
  CollectiveCall call;
  if (one_buffer || adjacent(tensors, bytes)) {
    one_buffer = true;
    call = allreduce_call(first, tensors.front()->send, tensors.front()->recv, bytes / elem);
  } else {
    // The communicator reads and writes the tensors where they lie, or
    // packs them when its algorithm cannot (collectives/scattered.hpp).
    bucket_parts_.clear();
    for (const auto& t : tensors) bucket_parts_.add(t->send, t->recv, t->shape.bytes());
    call = allreduce_call(first, nullptr, nullptr, bytes / elem);
    call.scattered = &bucket_parts_;
  }
  if (first.dtype == DataType::f32) call.wire = options_.wire;
  Clock::time_point copy_in, reduce, copy_out;
  std::string algorithm;
  if (timed) {
    copy_in = reduce = Clock::now();
    if (bytes > 0) algorithm = std::string(comm_->explain(call).spec->name);
  }
  if (bytes > 0) comm_->run(call, deadline());
  if (timed) copy_out = Clock::now();
  if (timed) {
    const auto end = Clock::now();
    // The engine copies nothing itself: a bucket in parts is copied into
    // and out of the collective's own staging inside the allreduce.
    const char* copies = one_buffer ? "none" : "in the allreduce";
    timeline_.span(0, "allreduce", reduce, copy_out,
                   {{"algorithm", algorithm},
                    {"bytes", bytes},
                    {"tensors", tensors.size()},
                    {"dtype", dtype_name(first.dtype)},
                    {"op", op_name(first.op)}});
    for (const auto& t : tensors) {
      const int track = timeline_.track(t->name());
      timeline_.span(track, "copy_in", copy_in, reduce, {{"copies", copies}});
      timeline_.span(track, "allreduce", reduce, copy_out,
                     {{"algorithm", algorithm}, {"bytes", bytes}, {"tensors", tensors.size()}});
      timeline_.span(track, "copy_out", copy_out, end, {{"copies", copies}});
    }
  }
  std::lock_guard lock(mu_);
  if (bytes > 0) ++stats_.allreduces;
  stats_.tensors += tensors.size();
  stats_.bytes += bytes;
}

void Engine::complete(std::span<FusedTensor* const> tensors) {
  {
    std::lock_guard lock(mu_);
    for (const auto& t : tensors) {
      NameSlot& slot = *t->slot;
      if (t->known_id < 0) {  // every rank reduced the name with this shape
        if (slot.known_id >= 0)
          known_.update(static_cast<uint32_t>(slot.known_id), t->spec());
        else if (auto id = known_.add(t->spec()))
          slot.known_id = *id;
      }
      slot.outstanding = false;
      outstanding_bytes_ -= t->shape.bytes();
    }
    outstanding_count_ -= tensors.size();
    known_count_ = known_.size();
  }
  for (const auto& t : tensors) t->completion.complete();
}

std::exception_ptr Engine::naming(std::exception_ptr error,
                                  std::span<const TensorSpec> specs) const {
  if (specs.empty()) return error;
  try {
    std::rethrow_exception(error);
  } catch (const IoError& e) {
    std::string text = fmt::format("{}; this fails rank {}'s tensor{} ", e.what(), rank_,
                                   specs.size() == 1 ? "" : "s");
    for (std::size_t i = 0; i < specs.size() && i < kMaxListed; ++i)
      text += (i ? ", " : "") + describe(specs[i]);
    if (specs.size() > kMaxListed) text += fmt::format(" and {} more", specs.size() - kMaxListed);
    return io_error(e.code(), text);
  } catch (...) {
    return error;  // not a communication failure: an invariant's values say it all
  }
}

void Engine::stop_with(std::exception_ptr cause, bool names_tensors) {
  std::vector<FusedPtr> failing;
  {
    std::lock_guard lock(mu_);
    if (!stopped_) stopped_ = cause;
    failing = std::move(pending_);
    failing.insert(failing.end(), incoming_.begin(), incoming_.end());
    pending_.clear();
    incoming_.clear();
    for (const auto& t : failing) t->slot->outstanding = false;
    outstanding_count_ = 0;
    outstanding_bytes_ = 0;
  }
  std::exception_ptr error = cause;
  if (!names_tensors) {
    std::vector<TensorSpec> specs;
    for (const auto& t : failing) specs.push_back(t->spec());
    error = naming(cause, specs);
  }
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    fusion_log().debug("rank {}: fusion engine stops: {}", rank_, e.what());
  }
  for (const auto& t : failing) t->completion.fail(error);
}

}  // namespace chorus::fusion
