// Control messages, failure, closing and waiting of the UCX transport.
#include <poll.h>
#include <unistd.h>

#include <utility>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace chorus::ucx {
void UcxTransport::handle_control(int peer, const ControlMessage& msg, std::size_t length) {
  if (peer < 0 || peer >= options_.size || peer == options_.rank) {
    log().warn("rank {}: ignored a control message claiming to come from rank {}", options_.rank,
               peer);
    return;
  }
  if (auto error = validate_control(msg.header, length, job_)) {
    peer_failed_locked(peer, fmt::format("it sent rank {} a malformed control message ({})",
                                         options_.rank, *error));
    return;
  }
  Peer& p = peers_[peer];
  if (p.gone || p.failure) return;
  switch (static_cast<ControlType>(msg.header.type)) {
    case ControlType::hello:
      on_hello(peer, msg.header);
      break;
    case ControlType::goodbye: {
      p.said_goodbye = true;
      // Receives UCX has not matched yet will never be: what the peer sent
      // came before its goodbye and is matched already.
      auto error = left_error(peer);
      for (auto& [raw, op] : p.ops) {
        if (op->is_send() || op->drain || !op->lead) continue;
        if (!op->cancel_error) op->cancel_error = error;
        ucp_request_cancel(worker_, op->lead);
      }
      break;
    }
    case ControlType::abort: {
      // The reason is the peer's own first error; keep its code when it is one.
      std::string reason;
      Spared spared;
      if (!decode_notice({msg.reason, msg.header.length}, reason, spared))
        reason = fmt::format("rank {} sent a malformed failure notice", peer);
      auto code = static_cast<chorus_result_t>(msg.header.code);
      if (code <= CHORUS_SUCCESS || code >= CHORUS_RESULT_COUNT_) code = CHORUS_ERR_ABORTED;
      log().debug("rank {}: rank {} reports: {}", options_.rank, peer, reason);
      // Pass it on unchanged, so every rank learns the first failure even if
      // the reporting rank exits before the others hear from it.
      fail_and_notify_locked(code, reason, fmt::format("{} (reported by rank {})", reason, peer),
                             spared);
      break;
    }
  }
}

void UcxTransport::check_endpoint_peer(int peer) const {
  CHORUS_CHECK(peer >= 0 && peer < options_.size && peer != options_.rank,
               "rank {}: no endpoint to peer {} (world size {})", options_.rank, peer,
               options_.size);
}

void UcxTransport::simulate_endpoint_error(int peer, ucs_status_t status) {
  check_endpoint_peer(peer);
  std::lock_guard lock(ep_errors_mu_);
  ep_errors_.emplace_back(peer, status);
}

void UcxTransport::simulate_send_error(int peer, ucs_status_t status) {
  check_endpoint_peer(peer);
  std::lock_guard lock(mu_);
  send_error_for_test_.emplace(peer, status);
}

void UcxTransport::on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* p = static_cast<Peer*>(arg);
  std::lock_guard lock(p->self->ep_errors_mu_);
  p->self->ep_errors_.emplace_back(p->rank, status);
}

void UcxTransport::close_ep_locked(int peer, bool force) {
  Peer& p = peers_[peer];
  if (!p.ep) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t request = ucp_ep_close_nbx(p.ep, &param);
  p.ep = nullptr;
  if (UCS_PTR_IS_PTR(request))
    closing_eps_.push_back(request);
  else if (UCS_PTR_IS_ERR(request))
    log().debug("rank {}: closing the endpoint to rank {}: {}", options_.rank, peer,
                ucs_status_string(UCS_PTR_STATUS(request)));
}

// The endpoint to `peer` failed (a malformed message, a failed control
// receive) or, `died`, its process is gone: unless it already said goodbye,
// that fails the whole transport. A death spares the calls in progress here
// (its messages were taken in first: process_events_locked); a failure
// spares nothing.
void UcxTransport::peer_failed_locked(int peer, const std::string& why, bool died) {
  Peer& p = peers_[peer];
  if (p.gone) return;
  close_ep_locked(peer, true);
  p.gone = true;
  if (closing_ || p.said_goodbye || p.failure) {
    log().debug("rank {}: endpoint to rank {} ended: {}", options_.rank, peer, why);
    auto error = p.failure ? p.failure : left_error(peer);
    for (auto& [raw, op] : p.ops)
      if (!op->drain && !op->control) fail_op(op.get(), error);
    return;
  }
  std::string message = fmt::format("peer failure: rank {} failed: {}", peer, why);
  log().error("{}", message);
  if (!died) {
    fail_and_notify_locked(CHORUS_ERR_PEER_FAILURE, message, "", Spared{});
    return;
  }
  p.lost = io_error(CHORUS_ERR_PEER_FAILURE, message);
  fail_and_notify_locked(CHORUS_ERR_PEER_FAILURE, message, "", board().started());
  // What it sent has been taken in: what a spared call still wants from it,
  // or still sends it, fails now.
  for (auto& [raw, op] : p.ops)
    if (!op->drain && !op->control) fail_op(op.get(), p.lost);
}

void UcxTransport::peer_died_locked(int peer, std::string why) {
  deaths_.emplace_back(peer, std::move(why));
}

// A failed endpoint is a dead peer, or a live one behind a connection that
// the network dropped: taken for dead, a live peer would take this rank for
// dead in turn, and each could finish a call the other fails. The control
// channel (TCP) can tell the two apart (tcp_probe.cpp), and its verdict
// comes back as its failure (RoutedTransport): fail_all_locked fails what
// that spares not, and a wait on the peer asks the control channel whether
// it is gone. A peer that said goodbye, or this rank closing, is no question.
void UcxTransport::lose_connection_locked(int peer, const std::string& why) {
  Peer& p = peers_[peer];
  if (!p.broken.empty()) return;
  if (!control_settles_locked(p)) {
    peer_died_locked(peer, why);
    return;
  }
  log().debug("rank {}: {}: the control channel settles whether rank {} is alive", options_.rank,
              why, peer);
  p.broken = why;
  close_ep_locked(peer, true);  // its sends in flight end: stranded (handle_event)
  lost_connections_.emplace_back(peer, why);
  lost_pending_.store(true, std::memory_order_release);
}

std::vector<std::pair<int, std::string>> UcxTransport::take_lost_connections() {
  if (!lost_pending_.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(mu_);
  lost_pending_.store(false, std::memory_order_relaxed);
  return std::exchange(lost_connections_, {});
}

std::exception_ptr UcxTransport::gone_error(int peer) const {
  const Peer& p = peers_[peer];
  return p.lost ? p.lost : left_error(peer);
}

// Fails every request but those of the calls failure_ spares.
void UcxTransport::fail_all_locked() {
  failed_.store(true, std::memory_order_release);
  for (auto& p : peers_)
    for (auto& [raw, op] : p.ops)
      if (!op->drain && !op->control && !failure_.spared.covers(op->tag(), op->signature()))
        fail_op(op.get(), failure_.error);
}

// Fails everything here and tells every live peer why (an abort notice with
// the result code), so that a rank which exits after a failure is never
// mistaken by the others for the rank that failed first. The notices are
// pushed out by flush_notices_locked, outside event handling.
//
// A later failure that spares less narrows what is spared (FailureRecord),
// fails what no longer is and tells the peers again with the first
// failure's code and message.
void UcxTransport::fail_and_notify_locked(chorus_result_t code, const std::string& message,
                                          const std::string& local_message, const Spared& spared) {
  // A peer failure may be a death in the middle of a send; an abort, a
  // timeout or a mismatch leaves what its sender wrote whole.
  if (code == CHORUS_ERR_PEER_FAILURE && !peer_mode_ &&
      arrivals_lost_since_.load(std::memory_order_relaxed) == 0)
    arrivals_lost_since_.store(Clock::now().time_since_epoch().count(), std::memory_order_release);
  if (!failure_.take(code, message, local_message, spared)) return;
  fail_all_locked();
  const std::string text = encode_notice(failure_.text, failure_.spared, kMaxReason);
  for (int peer = 0; peer < options_.size; ++peer) {
    Peer& p = peers_[peer];
    if (peer == options_.rank || !p.ep || p.gone || p.failure) continue;
    notices_.push_back(send_control_locked(peer, ControlType::abort, failure_.code, text));
  }
  notices_pending_ = true;
}

// Pushes the abort notices out now (bounded): the process may exit right
// after the caller sees its error, and a notice still queued would be lost.
void UcxTransport::flush_notices_locked() {
  flushing_ = true;
  notices_pending_ = false;
  auto pending = [&] {
    for (const auto& n : notices_)
      if (n->sends_left > 0) return true;
    return false;
  };
  auto deadline = Deadline::after(std::chrono::seconds(2));
  process_events_locked();
  while (pending() && !deadline.expired()) {
    while (ucp_worker_progress(worker_) != 0) {
    }
    process_events_locked();
    if (pending() && arm_locked() == Arm::armed) {
      pollfd pfd{efd_, POLLIN, 0};
      ::poll(&pfd, 1, 1);
    }
  }
  notices_.clear();
  flushing_ = false;
}

// Whether UCX still holds a receive buffer of `peer` (-1: of any peer);
// given_up_only: only of receives that have failed (a failure's spared
// receives go on, holding their buffers).
bool UcxTransport::recvs_in_ucx(int peer, bool given_up_only) const {
  for (int j = 0; j < options_.size; ++j) {
    if (peer >= 0 && j != peer) continue;
    for (const auto& [raw, op] : peers_[j].ops)
      if (!op->is_send() && !op->drain && (op->lead || op->bulk) && (!given_up_only || op->done()))
        return true;
  }
  return false;
}

void UcxTransport::fail(chorus_result_t code, const std::string& message, const Spared& spared) {
  std::unique_lock lock(mu_);
  fail_and_notify_locked(code, message, "", spared);
  process_events_locked();
  if (notices_pending_) flush_notices_locked();
  // Receives UCX matched before the cancel complete when their data is in;
  // return only once no receive buffer is in UCX's hands.
  auto deadline = Deadline::after(std::chrono::seconds(2));
  if (drive_until(
          lock, [&] { return !recvs_in_ucx(-1, true); }, deadline))
    return;
  for (int peer = 0; peer < options_.size; ++peer)
    if (recvs_in_ucx(peer, true)) close_ep_locked(peer, true);
  if (!drive_until(
          lock, [&] { return !recvs_in_ucx(-1, true); },
          Deadline::after(std::chrono::milliseconds(500))))
    log().warn("rank {}: after abort, UCX still holds receive buffers", options_.rank);
}

void UcxTransport::fail_peer(int peer, chorus_result_t code, const std::string& message) {
  CHORUS_CHECK(peer >= 0 && peer < options_.size && peer != options_.rank,
               "rank {} cannot fail peer {} (world size {})", options_.rank, peer, options_.size);
  std::unique_lock lock(mu_);
  Peer& p = peers_[peer];
  if (!p.failure) p.failure = io_error(code, message);
  for (auto& [raw, op] : p.ops)
    if (!op->drain && !op->control) fail_op(op.get(), p.failure);
  // A forced close also ends the sends to it and what UCX matched already, in
  // mode PEER. In mode NONE UCX 1.13 cannot end those: a send only reads its
  // buffer, and a matched receive from a dead peer gets no more data.
  close_ep_locked(peer, true);
  p.gone = true;
  process_events_locked();
  if (!drive_until(
          lock, [&] { return !recvs_in_ucx(peer); }, Deadline::after(std::chrono::seconds(2))))
    log().warn("rank {}: after failing rank {}, UCX still holds receive buffers", options_.rank,
               peer);
}

std::optional<Clock::time_point> UcxTransport::arrivals_may_be_lost_since() const {
  const Clock::rep since = arrivals_lost_since_.load(std::memory_order_acquire);
  if (since == 0) return std::nullopt;
  return Clock::time_point(Clock::duration(since));
}

void UcxTransport::close() {
  std::unique_lock lock(mu_);
  if (closing_) return;
  closing_ = true;
  for (int peer = 0; peer < options_.size; ++peer) {
    Peer& p = peers_[peer];
    if (peer != options_.rank && p.ep && !p.gone && !p.failure)
      p.goodbye = send_control_locked(peer, ControlType::goodbye);
  }
  // Wait (bounded) until our goodbyes are out and every peer said goodbye; a
  // failed job waits less. (Their goodbyes may never come where a dead
  // sender stopped the receive queue: arrivals_may_be_lost_since.)
  const double wait_s = failure_ ? 2.0 : options_.close_timeout_s;
  auto deadline = Deadline::after(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(wait_s)));
  bool settled = drive_until(
      lock,
      [&] {
        for (int peer = 0; peer < options_.size; ++peer) {
          const Peer& p = peers_[peer];
          if (peer == options_.rank || p.gone || p.failure || !p.broken.empty()) continue;
          if (!p.said_goodbye || (p.goodbye && p.goodbye->sends_left > 0)) return false;
        }
        return true;
      },
      deadline);
  if (!settled)
    log().warn("rank {}: closing without every peer's goodbye after {} s", options_.rank, wait_s);
}

// ---- Progress and waiting.

UcxTransport::Arm UcxTransport::arm_locked() {
  ucs_status_t status = ucp_worker_arm(worker_);
  if (status == UCS_OK) return Arm::armed;
  if (status == UCS_ERR_BUSY) return Arm::busy;
  return Arm::unsupported;  // no event fd for some transport: back off instead
}

bool UcxTransport::poll() {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  return progress_locked();
}

void UcxTransport::spin_begin() {
  spinners_.fetch_add(1, std::memory_order_seq_cst);
}

// As in the TCP transport: the progress thread is woken when the last waiter
// leaves only if something is in flight.
void UcxTransport::spin_end() {
  if (spinners_.fetch_sub(1, std::memory_order_seq_cst) != 1) return;
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || live_ops_ > 0) futex_wake_all(spinners_);
}

void UcxTransport::check_failed() {
  if (!failed_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(mu_);
  if (failure_) std::rethrow_exception(failure_.error);
}

void UcxTransport::check_call(uint32_t tag, const CallSignature& sig) {
  if (!failed_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(mu_);
  if (failure_.refuses(tag, sig)) std::rethrow_exception(failure_.error);
}

Spared UcxTransport::spared() const {
  std::lock_guard lock(mu_);
  return failure_.spared;
}

void UcxTransport::check_peer(int peer, uint32_t tag, const CallSignature& sig) {
  check_call(tag, sig);
  CHORUS_CHECK(peer >= 0 && peer < options_.size, "no rank {} among {}", peer, options_.size);
  std::lock_guard lock(mu_);
  const Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (p.failure) std::rethrow_exception(p.failure);
  if (p.said_goodbye || p.gone) std::rethrow_exception(gone_error(peer));
}

// Sleeps on the worker's event fd (and on wake_fd_, written when another
// thread completes something while this one sleeps) with the lock released.
void UcxTransport::sleep_locked(std::unique_lock<std::mutex>& lock, Arm arm, int timeout_ms) {
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  lock.unlock();
  pollfd fds[2] = {{arm == Arm::armed ? efd_ : -1, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  int n = ::poll(fds, 2, arm == Arm::armed ? timeout_ms : std::min(timeout_ms, 1));
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  if (n > 0 && (fds[1].revents & POLLIN)) {
    uint64_t value;
    [[maybe_unused]] auto r = ::read(wake_fd_, &value, sizeof value);
  }
  lock.lock();
}

void UcxTransport::wait_for_progress(Request& pending, std::chrono::nanoseconds timeout) {
  if (pending.done()) return;
  std::unique_lock lock(mu_);
  progress_locked();
  if (pending.done()) return;
  Arm arm = arm_locked();
  if (arm == Arm::busy) return;
  int ms = static_cast<int>(std::clamp<int64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count(), 1, 1000));
  sleep_locked(lock, arm, ms);
  progress_locked();
}

bool UcxTransport::drive_until(std::unique_lock<std::mutex>& lock,
                               const std::function<bool()>& pred, const Deadline& deadline) {
  spinners_.fetch_add(1, std::memory_order_seq_cst);  // the progress thread stands aside
  bool ok;
  while (true) {
    progress_locked();
    if ((ok = pred()) || deadline.expired()) break;
    Arm arm = arm_locked();
    if (arm != Arm::busy) sleep_locked(lock, arm, deadline.poll_timeout_ms(20));
  }
  spinners_.fetch_sub(1, std::memory_order_seq_cst);
  return ok;
}

void UcxTransport::progress_loop() {
  while (!stop_.load(std::memory_order_relaxed)) {
    // A spinning waiter drives UCX itself; sleep until it stops (bounded, so
    // stop_ is still seen).
    if (uint32_t spinning = spinners_.load(std::memory_order_seq_cst); spinning != 0) {
      futex_wait(spinners_, spinning, std::chrono::milliseconds(50));
      continue;
    }
    Arm arm;
    bool moved;
    {
      std::lock_guard lock(mu_);
      moved = progress_locked();
      arm = arm_locked();
    }
    if (arm == Arm::busy && moved) continue;
    pollfd fds[2] = {{arm == Arm::armed ? efd_ : -1, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    ::poll(fds, 2, arm == Arm::armed ? 100 : 1);
  }
}

}  // namespace chorus::ucx
