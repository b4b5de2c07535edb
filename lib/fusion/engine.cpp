#include "lib/fusion/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "collectives/registry.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace chorus::fusion {
namespace {

spdlog::logger& fusion_log() {
  static spdlog::logger& subsystem = logger("fusion");
  return subsystem;
}

// The round period of a rank with nothing pending: it still joins the
// rounds of ranks that have something (their stall and timeout verdicts
// need it), but does not wake, and take the cores of the peers' compute or
// collectives, every cycle (measured: docs/architecture.md, "When").
constexpr auto kIdleCycle = std::chrono::milliseconds(10);
constexpr std::size_t kMaxListed = 8;  // tensors named in one message

std::chrono::nanoseconds seconds(double s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

CollectiveCall allreduce_call(const TensorShape& shape, const void* send, void* recv,
                              std::size_t count) {
  CollectiveCall call;
  call.kind = CollectiveKind::allreduce;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.dtype = shape.dtype;
  call.op = shape.op;
  return call;
}

std::string rank_names(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

// The bucket's tensors lie back to back in memory, in bucket order, all in
// place or all with back-to-back outputs apart from the inputs: one
// allreduce on the user's memory serves, with no copy (what DDP's
// gradient_as_bucket_view arranges). Each rank decides for itself: the
// collective is the same either way.
bool adjacent(std::span<FusedTensor* const> tensors, std::size_t bytes) {
  const auto* send = static_cast<const std::byte*>(tensors.front()->send);
  auto* recv = static_cast<std::byte*>(tensors.front()->recv);
  const bool in_place = send == recv;
  std::size_t offset = 0;
  for (const auto& t : tensors) {
    if (t->send != send + offset || t->recv != recv + offset) return false;
    offset += t->shape.bytes();
  }
  return in_place || recv + bytes <= send || send + bytes <= recv;
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
  if (triggered_locked()) {
    trigger_ = true;
    cv_.notify_one();
  } else if (first) {
    cv_.notify_one();  // it sleeps for the idle period: one cycle is due now
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
    } catch (...) {
      cycles_over_ = true;
      stop_with(std::current_exception());
      return;
    }
    last_end_ = Clock::now();
  }
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

std::vector<FusedTensor*> Engine::negotiate(Stop& stop) {
  const auto start = Clock::now();
  bool has_new = false, stall = false, timed_out = false, shutting_down;
  std::vector<uint8_t> vec(kFlagCount + known_.size(), 0);
  // pending_'s index of each known id pending here (fast path), or -1.
  std::vector<int64_t> pending_of(known_.size(), -1);
  const auto stall_after = seconds(options_.stall_s), timeout_after = seconds(options_.timeout_s);
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    FusedTensor& t = *pending_[i];
    t.ready_index = -1;
    const int64_t id = t.slot->known_id;  // written by cycles only, as this one
    t.known_id = id >= 0 && known_.at(static_cast<uint32_t>(id)).same_shape(t.shape) ? id : -1;
    if (t.known_id >= 0) {
      vec[kFlagCount + static_cast<std::size_t>(t.known_id)] = 1;
      pending_of[static_cast<std::size_t>(t.known_id)] = static_cast<int64_t>(i);
    } else {
      has_new = true;
    }
    const auto age = start - t.submitted;
    if (age > stall_after && start - last_stall_warning_ > stall_after) stall = true;
    if (age > timeout_after) timed_out = true;
  }
  {
    std::lock_guard lock(mu_);
    shutting_down = shutdown_requested_;
  }
  const bool raised[kFlagCount] = {has_new, stall, timed_out, shutting_down};
  uint32_t flags = 0;
  for (std::size_t f = 0; f < kFlagCount; ++f) {
    vec[f] = raised[f] ? 0 : 1;
    flags |= raised[f] ? 1u << f : 0u;
  }
  comm_->run(
      allreduce_call({vec.size(), DataType::u8, ReduceOp::min}, vec.data(), vec.data(), vec.size()),
      deadline());

  const bool slow = !vec[kHasNew] || !vec[kStallCheck] || !vec[kTimedOut] || !vec[kShutdown];
  std::vector<FusedTensor*> ready;
  if (!slow) {
    ready.reserve(pending_.size());
    for (std::size_t id = 0; id < known_.size(); ++id)
      if (vec[kFlagCount + id]) {
        CHORUS_CHECK(pending_of[id] >= 0,
                     "known tensor '{}' is ready everywhere but not pending "
                     "on rank {}",
                     known_.at(static_cast<uint32_t>(id)).name, rank_);
        ready.push_back(pending_[static_cast<std::size_t>(pending_of[id])].get());
      }
    {
      std::lock_guard lock(mu_);
      ++stats_.cycles;
      ++stats_.fast_cycles;
    }
    if (timed_)  // the arguments alone cost allocations on every cycle
      timeline_.span(0, "negotiate", start, Clock::now(),
                     {{"path", "fast"}, {"ready", ready.size()}});
    return ready;
  }

  // The full exchange: every rank's pending list.
  RankReport mine{flags, {}};
  for (const auto& t : pending_) mine.pending.push_back(t->spec());
  const std::vector<uint8_t> bytes = encode_report(mine);
  std::vector<std::size_t> sizes(static_cast<std::size_t>(size_));
  const uint64_t my_size = bytes.size();
  CollectiveCall sizes_call;
  sizes_call.kind = CollectiveKind::allgather;
  sizes_call.send = &my_size;
  sizes_call.recv = sizes.data();
  sizes_call.count = 1;
  sizes_call.dtype = DataType::u64;
  static_assert(sizeof(std::size_t) == sizeof(uint64_t));
  comm_->run(sizes_call, deadline());
  std::size_t total = 0;
  for (auto s : sizes) total += s;
  std::vector<uint8_t> all(total);
  CollectiveCall lists;
  lists.kind = CollectiveKind::allgatherv;
  lists.send = bytes.data();
  lists.recv = all.data();
  lists.counts = sizes.data();
  lists.dtype = DataType::u8;
  comm_->run(lists, deadline());
  std::vector<RankReport> reports;
  std::size_t at = 0;
  for (auto s : sizes) {
    reports.push_back(decode_report({all.data() + at, s}));
    at += s;
  }
  Agreement agreement = agree(reports);
  {
    std::lock_guard lock(mu_);
    ++stats_.cycles;
    ++stats_.slow_cycles;
  }
  if (timed_)
    timeline_.span(0, "negotiate", start, Clock::now(),
                   {{"path", "full"}, {"ready", agreement.ready.size()}});

  if (agreement.mismatch) {
    stop = {io_error(CHORUS_ERR_MISMATCH, "fused allreduce: " + describe(*agreement.mismatch)),
            true};
    return {};
  }
  auto listed = [&](const std::string& lead) {
    std::string text = lead;
    for (std::size_t i = 0; i < agreement.missing.size() && i < kMaxListed; ++i)
      text += (i ? "; " : "") + describe(agreement.missing[i]);
    if (agreement.missing.size() > kMaxListed)
      text += fmt::format("; and {} more", agreement.missing.size() - kMaxListed);
    return text;
  };
  std::vector<int> timed_out_ranks, stopping_ranks;
  bool stall_round = false;
  for (int r = 0; r < size_; ++r) {
    const auto& report = reports[static_cast<std::size_t>(r)];
    if (report.has(kTimedOut)) timed_out_ranks.push_back(r);
    if (report.has(kShutdown)) stopping_ranks.push_back(r);
    stall_round = stall_round || report.has(kStallCheck);
  }
  if (!timed_out_ranks.empty() && !agreement.missing.empty()) {
    stop = {io_error(CHORUS_ERR_TIMEOUT,
                     listed(fmt::format("fused allreduce: not every rank submitted its tensors "
                                        "within CHORUS_TIMEOUT ({} s): ",
                                        options_.timeout_s))),
            true};
    return {};
  }
  if (stall_round) {
    last_stall_warning_ = start;
    if (!agreement.missing.empty())
      fusion_log().warn(
          "rank {}: fusion stall: {}", rank_,
          listed(fmt::format("for more than {} s (CHORUS_FUSION_STALL_S), ", options_.stall_s)));
  }
  if (!stopping_ranks.empty()) {
    const std::string lead =
        fmt::format("fused allreduce: {} shut down the fusion engine (destroyed the communicator)",
                    rank_names(stopping_ranks));
    stop = {io_error(CHORUS_ERR_PEER_FAILURE,
                     agreement.missing.empty() ? lead : listed(lead + " while ")),
            !agreement.missing.empty()};
  }
  std::unordered_map<std::string_view, FusedTensor*> pending_by_name;
  for (const auto& t : pending_) pending_by_name.emplace(t->name(), t.get());
  for (const auto& spec : agreement.ready) {
    auto it = pending_by_name.find(spec.name);
    CHORUS_CHECK(it != pending_by_name.end(), "ready tensor '{}' is not pending on rank {}",
                 spec.name, rank_);
    ready.push_back(it->second);
  }
  return ready;
}

void Engine::execute(std::vector<FusedTensor*> ready, Clock::time_point agreed) {
  if (ready.empty()) return;
  const auto buckets =
      plan_buckets(ready, options_.fusion_bytes, options_.alone_bytes,
                   [](const FusedTensor* t) -> const TensorShape& { return t->shape; });
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
  bool direct = tensors.size() == 1;
  const bool timed = timeline_.enabled();
  if (timed)
    for (const auto& t : tensors) {
      const int track = timeline_.track(t->name());
      timeline_.instant(track, "submitted", t->submitted);
      timeline_.span(track, "negotiate", t->submitted, agreed);
    }
  CollectiveCall call;
  if (direct || adjacent(tensors, bytes)) {
    direct = true;
    call = allreduce_call(first, tensors.front()->send, tensors.front()->recv, bytes / elem);
  } else {
    if (fusion_buffer_.size() < bytes) fusion_buffer_.resize(bytes);
    call = allreduce_call(first, fusion_buffer_.data(), fusion_buffer_.data(), bytes / elem);
  }
  if (first.dtype == DataType::f32) call.wire = options_.wire;
  Clock::time_point copy_in, reduce, copy_out;
  if (timed) copy_in = Clock::now();
  if (!direct) {
    std::size_t offset = 0;
    for (const auto& t : tensors) {
      const std::size_t n = t->shape.bytes();
      if (n) std::memcpy(fusion_buffer_.data() + offset, t->send, n);
      offset += n;
    }
  }
  std::string algorithm;
  if (timed) {
    reduce = Clock::now();
    if (bytes > 0) algorithm = std::string(comm_->explain(call).spec->name);
  }
  if (bytes > 0) comm_->run(call, deadline());
  if (timed) copy_out = Clock::now();
  if (!direct) {
    std::size_t offset = 0;
    for (const auto& t : tensors) {
      const std::size_t n = t->shape.bytes();
      if (n) std::memcpy(t->recv, fusion_buffer_.data() + offset, n);
      offset += n;
    }
  }
  if (timed) {
    const auto end = Clock::now();
    timeline_.span(0, "allreduce", reduce, copy_out,
                   {{"algorithm", algorithm},
                    {"bytes", bytes},
                    {"tensors", tensors.size()},
                    {"dtype", dtype_name(first.dtype)},
                    {"op", op_name(first.op)}});
    for (const auto& t : tensors) {
      const int track = timeline_.track(t->name());
      timeline_.span(track, "copy_in", copy_in, reduce, {{"direct", direct}});
      timeline_.span(track, "allreduce", reduce, copy_out,
                     {{"algorithm", algorithm}, {"bytes", bytes}, {"tensors", tensors.size()}});
      timeline_.span(track, "copy_out", copy_out, end, {{"direct", direct}});
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
