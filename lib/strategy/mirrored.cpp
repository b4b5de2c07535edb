#include "lib/strategy/mirrored.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "collectives/call.hpp"
#include "lib/strategy/replica_check.hpp"

namespace chorus::strategy {
namespace {

spdlog::logger& strategy_log() {
  static spdlog::logger& subsystem = logger("strategy");
  return subsystem;
}

// The engine's names are the communicator's, shared with the user's own
// fused calls: the prefix keeps the strategy's apart.
std::string engine_name(const std::string& name) {
  return "mirrored/" + name;
}

CollectiveCall call_of(CollectiveKind kind, const void* send, void* recv, std::size_t count,
                       DataType dtype) {
  CollectiveCall call;
  call.kind = kind;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.dtype = dtype;
  return call;
}

}  // namespace

Mirrored::Mirrored(Communicator& comm, fusion::EngineSlot& fusion, MirroredOptions options)
    : comm_(comm), fusion_(fusion), options_(options), spin_(comm.wait_spin()) {
  if (options.root < 0 || options.root >= comm.size())
    throw UsageError(fmt::format("mirrored: root {} is not a rank of this communicator (0..{})",
                                 options.root, comm.size() - 1));
  if (options.check_every < 0)
    throw UsageError(fmt::format("mirrored: check_replicas {} is negative", options.check_every));
  strategy_log().debug("mirrored strategy on {} ranks: root {}, {}, replica check every {} steps",
                       comm.size(), options.root,
                       options.use_fusion ? "fusion engine" : "grouped allreduces",
                       options.check_every);
}

Mirrored::~Mirrored() = default;

void Mirrored::add_variable(std::string name, void* data, void* gradient, std::size_t count,
                            DataType dtype) {
  std::lock_guard lock(mu_);
  if (name.empty()) throw UsageError("mirrored: add_variable: the variable name is empty");
  if (index_.count(name))
    throw UsageError(
        fmt::format("mirrored: add_variable: variable '{}' is already registered", name));
  if (!data) throw UsageError(fmt::format("mirrored: add_variable: variable '{}' is NULL", name));
  if (count == 0)
    throw UsageError(fmt::format("mirrored: add_variable: variable '{}' has a count of 0", name));
  if (count > SIZE_MAX / dtype_size(dtype))
    throw UsageError(fmt::format(
        "mirrored: add_variable: variable '{}' of {} elements is larger than memory", name, count));
  if (gradient == data)
    throw UsageError(fmt::format(
        "mirrored: add_variable: variable '{}' and its gradient are the same memory", name));
  index_.emplace(name, variables_.size());
  Variable& v = variables_.emplace_back();
  v.name = std::move(name);
  v.data = data;
  v.gradient = gradient;
  v.count = count;
  v.dtype = dtype;
}

Mirrored::Variable& Mirrored::find_locked(std::string_view name, const char* call) {
  auto it = index_.find(std::string(name));
  if (it == index_.end())
    throw UsageError(fmt::format("mirrored: {}: no variable '{}' is registered", call, name));
  return variables_[it->second];
}

fusion::Engine& Mirrored::engine_locked() {
  return fusion_.engine(comm_);
}

void Mirrored::broadcast_variables(const Deadline& deadline) {
  std::lock_guard lock(mu_);
  if (options_.use_fusion) engine_locked();
  // Non-blocking, then waited for together: the broadcasts follow one
  // another on the communicator's worker with no round trip to this thread.
  std::vector<WorkPtr> works;
  works.reserve(variables_.size());
  for (auto& v : variables_) {
    CollectiveCall call = call_of(CollectiveKind::broadcast, v.data, v.data, v.count, v.dtype);
    call.root = options_.root;
    works.push_back(comm_.submit(call));
  }
  for (std::size_t i = 0; i < works.size(); ++i) {
    if (!works[i]->completion().wait(deadline, spin_))
      throw IoError(CHORUS_ERR_TIMEOUT,
                    fmt::format("mirrored: broadcast of variable '{}' not finished by the deadline",
                                variables_[i].name));
    works[i]->completion().rethrow_if_failed();
  }
}

void Mirrored::submit_locked(Variable& v) {
  if (options_.use_fusion) {
    v.fused = engine_locked().submit(engine_name(v.name), {v.count, v.dtype, ReduceOp::avg},
                                     v.gradient, v.gradient);
  } else {
    CollectiveCall call =
        call_of(CollectiveKind::allreduce, v.gradient, v.gradient, v.count, v.dtype);
    call.op = ReduceOp::avg;
    v.work = comm_.submit(call);
  }
  v.reduction = Reduction::in_flight;
}

void Mirrored::gradient_ready(std::string_view name) {
  std::lock_guard lock(mu_);
  Variable& v = find_locked(name, "gradient_ready");
  if (!v.gradient)
    throw UsageError(fmt::format(
        "mirrored: gradient_ready: variable '{}' was registered without a gradient", name));
  if (v.reduction != Reduction::idle)
    throw UsageError(fmt::format(
        "mirrored: gradient_ready: the gradient of '{}' was already handed over this step (a "
        "step ends at apply or end_step)",
        name));
  // Without the engine nothing starts before reduce_gradients: the
  // allreduces must go in registration order to pair up across ranks.
  if (options_.use_fusion)
    submit_locked(v);
  else
    v.reduction = Reduction::ready;
}

void Mirrored::wait_locked(Variable& v, const Deadline& deadline) {
  Completion& done = v.fused ? v.fused->completion : v.work->completion();
  if (v.fused && !done.done()) engine_locked().kick();  // the cycle may be due at once
  if (!done.wait(deadline, spin_))
    throw IoError(CHORUS_ERR_TIMEOUT,
                  fmt::format("mirrored: reduce_gradients: the gradient of '{}' not reduced by "
                              "the deadline (the reduction goes on; call again to wait)",
                              v.name));
  const bool failed = done.failed();
  const std::exception_ptr error = done.error();
  v.fused = nullptr;
  v.work = nullptr;
  v.reduction = failed ? Reduction::idle : Reduction::reduced;
  if (failed) std::rethrow_exception(error);
}

void Mirrored::reduce_gradients(const Deadline& deadline) {
  std::lock_guard lock(mu_);
  for (auto& v : variables_)
    if (v.gradient && (v.reduction == Reduction::idle || v.reduction == Reduction::ready))
      submit_locked(v);
  for (auto& v : variables_)
    if (v.reduction == Reduction::in_flight) wait_locked(v, deadline);
}

void Mirrored::apply(const OptimizerOptions& options) {
  std::lock_guard lock(mu_);
  validate(options);
  if (optimizer_kind_ && *optimizer_kind_ != options.kind)
    throw UsageError(
        fmt::format("mirrored: apply: the optimizer is {} (fixed by the first apply), not {}",
                    optimizer_name(*optimizer_kind_), optimizer_name(options.kind)));
  // Every check before any update: a refused apply changes nothing.
  for (const auto& v : variables_) {
    if (!v.gradient) continue;
    if (v.dtype != DataType::f32 && v.dtype != DataType::f64)
      throw UsageError(fmt::format(
          "mirrored: apply: variable '{}' is {}; the optimizers update float32 and float64 only "
          "(register it without a gradient to mirror it untrained)",
          v.name, dtype_name(v.dtype)));
    if (v.reduction != Reduction::reduced)
      throw UsageError(CHORUS_ERR_INVALID_USAGE,
                       fmt::format("mirrored: apply: the gradient of '{}' has not been reduced "
                                   "this step (call reduce_gradients first)",
                                   v.name));
  }
  optimizer_kind_ = options.kind;
  for (auto& v : variables_) {
    if (!v.gradient) continue;
    if (!v.optimizer) v.optimizer.emplace(options.kind, v.dtype, v.count);
    v.optimizer->step(options, v.data, v.gradient);
    v.reduction = Reduction::idle;
  }
}

void Mirrored::end_step(const Deadline& deadline) {
  std::lock_guard lock(mu_);
  ++steps_;
  for (auto& v : variables_)
    if (v.reduction == Reduction::reduced) v.reduction = Reduction::idle;
  if (options_.check_every > 0 && steps_ % static_cast<uint64_t>(options_.check_every) == 0)
    check_replicas_locked(deadline);
}

void Mirrored::check_replicas(const Deadline& deadline) {
  std::lock_guard lock(mu_);
  check_replicas_locked(deadline);
}

void Mirrored::check_replicas_locked(const Deadline& deadline) {
  std::vector<VariableLayout> layout;
  layout.reserve(variables_.size());
  std::vector<uint64_t> mine;
  mine.reserve(variables_.size() + 1);
  for (const auto& v : variables_) layout.push_back({v.name, v.count, v.dtype});
  mine.push_back(digest_layout(layout));
  for (const auto& v : variables_) mine.push_back(digest_bytes(v.data, v.bytes()));
  // One allgather: a rank with another number of variables fails it as a
  // mismatch of the call itself.
  std::vector<uint64_t> all(mine.size() * static_cast<std::size_t>(comm_.size()));
  comm_.run(call_of(CollectiveKind::allgather, mine.data(), all.data(), mine.size(), DataType::u64),
            deadline);
  const auto divergence = first_divergence(all, comm_.size());
  if (!divergence) {
    strategy_log().debug("replica check at step {}: {} variables identical on {} ranks", steps_,
                         variables_.size(), comm_.size());
    return;
  }
  std::vector<std::string> names;
  names.reserve(variables_.size());
  for (const auto& v : variables_) names.push_back(v.name);
  const std::string message = describe_divergence(*divergence, names, steps_);
  strategy_log().error("{}", message);
  throw IoError(CHORUS_ERR_MISMATCH, message);
}

void Mirrored::drain(const Deadline& deadline) noexcept {
  std::lock_guard lock(mu_);
  for (auto& v : variables_) {
    if (v.reduction != Reduction::in_flight) continue;
    Completion& done = v.fused ? v.fused->completion : v.work->completion();
    if (v.fused && !done.done()) engine_locked().kick();  // the cycle may be due at once
    done.wait(deadline, spin_);
  }
}

uint64_t Mirrored::steps() const {
  std::lock_guard lock(mu_);
  return steps_;
}

}  // namespace chorus::strategy
