#include "lib/strategy/ps/server.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/core/error.hpp"
#include "base/core/log.hpp"

namespace chorus::strategy::ps {

spdlog::logger& log() {
  static spdlog::logger& subsystem = logger("ps");  // the registry locks a mutex
  return subsystem;
}

namespace {

// A worker may compute for as long as it likes between requests; its death
// ends the wait (isolated peer failure), not a deadline.
Deadline patient() {
  return Deadline::after(std::chrono::hours(24 * 365));
}

}  // namespace

Server::Server(Transport& transport, Options options,
               std::vector<ParameterServer::Variable> variables, std::size_t bytes,
               std::vector<int> workers)
    : transport_(transport),
      options_(options),
      variables_(std::move(variables)),
      bytes_(bytes),
      values_(bytes),
      sum_(options.mode == Mode::sync ? bytes : 0) {
  for (int w : workers) workers_[w] = WorkerState{};
}

void Server::receive(int worker, uint32_t tag, void* data, std::size_t bytes) {
  auto request = transport_.irecv(worker, tag, message_signature(bytes),
                                  {static_cast<std::byte*>(data), bytes});
  wait_one(transport_, request, patient(), 0, "parameter server request");
}

void Server::receive_initial(int chief, const Deadline& deadline) {
  Header request;
  auto r = transport_.irecv(chief, kRequestTag, message_signature(sizeof request),
                            {reinterpret_cast<std::byte*>(&request), sizeof request});
  wait_one(transport_, r, deadline, 0, "the chief's initial values");
  if (request.kind != static_cast<uint32_t>(Kind::set) || request.bytes != bytes_)
    throw InvariantError(fmt::format(
        "parameter server: expected the chief's initial values ({} bytes), got request {} of {} "
        "bytes",
        bytes_, request.kind, request.bytes));
  answer(chief, request);
}

void Server::serve(const OptimizerOptions& optimizer) {
  validate(optimizer);
  {
    std::lock_guard lock(mu_);
    optimizer_ = &optimizer;
    states_.clear();
    for (const auto& v : variables_) states_.emplace_back(optimizer.kind, v.dtype, v.count);
  }
  std::vector<std::thread> threads;
  for (const auto& [worker, state] : workers_)
    threads.emplace_back([this, worker = worker] { serve_worker(worker); });
  for (auto& t : threads) t.join();
  std::lock_guard lock(mu_);
  optimizer_ = nullptr;
}

void Server::serve_worker(int worker) {
  try {
    for (;;) {
      Header request;
      receive(worker, kRequestTag, &request, sizeof request);
      if (!answer(worker, request)) return;
    }
  } catch (const std::exception& e) {  // its requests failed, or it sent nonsense
    log().warn(
        "parameter server (rank {}): worker rank {} failed: {}; training goes on without "
        "it",
        transport_.rank(), worker, e.what());
    std::lock_guard lock(mu_);
    leave_locked(worker, true);
  }
}

bool Server::answer(int worker, const Header& request) {
  const auto kind = static_cast<Kind>(request.kind);
  const bool takes_payload = kind == Kind::set || kind == Kind::push;
  // A payload is the whole shard (which may be empty: more servers than variables).
  if (request.bytes != (takes_payload ? bytes_ : 0))
    throw InvariantError(fmt::format(
        "parameter server (rank {}): request {} from rank {} carries {} bytes; the shard has {}",
        transport_.rank(), request.kind, worker, request.bytes, bytes_));
  std::vector<std::byte> payload(takes_payload ? bytes_ : 0);
  if (takes_payload) receive(worker, kPayloadTag, payload.data(), payload.size());
  std::vector<std::byte> values;
  bool more = true;
  {
    std::unique_lock lock(mu_);
    switch (kind) {
      case Kind::set:
        std::memcpy(values_.data(), payload.data(), bytes_);
        break;
      case Kind::read:
        values = values_;
        break;
      case Kind::pull:
        cv_.wait(lock, [&] { return may_start_locked(request.step); });
        values = values_;
        break;
      case Kind::push:
        push_locked(worker, request.step, payload.data());
        break;
      case Kind::done:
        leave_locked(worker, false);
        more = false;
        break;
      default:
        throw InvariantError(
            fmt::format("parameter server (rank {}): unknown request {} from "
                        "rank {}",
                        transport_.rank(), request.kind, worker));
    }
  }
  reply(worker, kind == Kind::read || kind == Kind::pull ? &values : nullptr);
  return more;
}

void Server::reply(int worker, const std::vector<std::byte>* payload) {
  Header header;
  header.kind = static_cast<uint32_t>(Kind::reply);
  {
    std::lock_guard lock(mu_);
    header.failed = failed_;
    header.version = version_;
  }
  header.bytes = payload ? payload->size() : 0;
  std::vector<RequestPtr> sends{
      transport_.isend(worker, kReplyTag, message_signature(sizeof header),
                       {reinterpret_cast<std::byte*>(&header), sizeof header})};
  if (payload)
    sends.push_back(
        transport_.isend(worker, kReplyPayloadTag, message_signature(payload->size()), *payload));
  wait_all(transport_, sends, patient(), 0, "parameter server reply");
}

bool Server::may_start_locked(int64_t step) const {
  switch (options_.mode) {
    case Mode::async:
      return true;
    case Mode::sync:
      return version_ >= step;
    case Mode::bounded:
      for (const auto& [rank, w] : workers_)
        if (w.live && w.pushed < step - options_.max_staleness) return false;
      return true;
  }
  return true;
}

void Server::apply_locked(const std::byte* gradients) {
  for (std::size_t i = 0; i < variables_.size(); ++i) {
    const auto& v = variables_[i];
    states_[i].step(*optimizer_, values_.data() + v.offset, gradients + v.offset);
  }
  ++version_;
  cv_.notify_all();
}

void Server::push_locked(int worker, int64_t step, const std::byte* gradients) {
  WorkerState& w = workers_.at(worker);
  if (step != w.pushed)
    throw InvariantError(
        fmt::format("parameter server (rank {}): rank {} pushed step {} after {} "
                    "steps",
                    transport_.rank(), worker, step, w.pushed));
  if (options_.mode != Mode::sync) {
    apply_locked(gradients);
  } else {
    if (contributors_ == 0) std::memcpy(sum_.data(), gradients, bytes_);
    for (const auto& v : variables_)
      if (contributors_ > 0)
        reduce_fn(v.dtype, ReduceOp::sum)(sum_.data() + v.offset, sum_.data() + v.offset,
                                          gradients + v.offset, v.count);
    ++contributors_;
  }
  ++w.pushed;
  if (options_.mode == Mode::sync) complete_sync_step_locked();
  cv_.notify_all();
}

// The step is complete when every live worker has pushed it.
void Server::complete_sync_step_locked() {
  if (contributors_ == 0) return;
  for (const auto& [rank, w] : workers_)
    if (w.live && w.pushed <= version_) return;
  for (const auto& v : variables_)
    scale_for_avg(sum_.data() + v.offset, v.count, v.dtype, contributors_);
  contributors_ = 0;
  apply_locked(sum_.data());
}

void Server::leave_locked(int worker, bool failed) {
  WorkerState& w = workers_.at(worker);
  if (!w.live) return;
  w.live = false;
  if (failed && worker < 64) failed_ |= uint64_t{1} << worker;
  if (options_.mode == Mode::sync) complete_sync_step_locked();
  cv_.notify_all();
}

}  // namespace chorus::strategy::ps
