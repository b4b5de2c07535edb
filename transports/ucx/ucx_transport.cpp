// Data path of the UCX transport: sends, receives, matching, events, failure.
#include "transports/ucx/ucx_transport.hpp"

#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "base/core/error.hpp"
#include "base/core/log.hpp"

namespace chorus::ucx {

spdlog::logger& log() {
  static spdlog::logger& subsystem = logger("ucx");  // the registry locks a mutex
  return subsystem;
}

namespace {

ucp_request_param_t send_param(void* user_data, ucp_send_nbx_callback_t cb) {
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  p.cb.send = cb;
  p.user_data = user_data;
  p.memory_type = UCS_MEMORY_TYPE_HOST;
  return p;
}

// NO_IMM_CMPL: a receive that completes at once still reports through its
// callback, with the message's length (UCX 1.13 leaves recv_info unset then).
ucp_request_param_t recv_param(void* user_data, ucp_tag_recv_nbx_callback_t cb) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                   UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.cb.recv = cb;
  p.user_data = user_data;
  p.memory_type = UCS_MEMORY_TYPE_HOST;
  return p;
}

void use_iov(ucp_request_param_t& p) {
  p.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
  p.datatype = ucp_dt_make_iov();
}

}  // namespace

// ---- UCX callbacks: they only queue events (they run inside UCX calls, mu_ held).

void UcxTransport::on_send_lead(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  op->owner->events_.push_back({op, Part::lead, request, status, 0, 0, op->peer()});
}

void UcxTransport::on_send_bulk(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  op->owner->events_.push_back({op, Part::bulk, request, status, 0, 0, op->peer()});
}

void UcxTransport::on_recv_lead(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                                void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  op->owner->events_.push_back(
      {op, Part::lead, request, status, info ? info->length : 0, 0, op->peer()});
}

void UcxTransport::on_recv_bulk(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                                void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  op->owner->events_.push_back(
      {op, Part::bulk, request, status, info ? info->length : 0, 0, op->peer()});
}

void UcxTransport::on_recv_control(void* request, ucs_status_t status,
                                   const ucp_tag_recv_info_t* info, void* user_data) {
  auto* self = static_cast<UcxTransport*>(user_data);
  self->events_.push_back({nullptr, Part::control, request, status, info ? info->length : 0,
                           info ? info->sender_tag : 0, -1});
}

// ---- Posting.

RequestPtr UcxTransport::isend(int peer, uint32_t tag, const CallSignature& sig,
                               std::span<const std::byte> data) {
  CHORUS_CHECK(peer >= 0 && peer < options_.size && peer != options_.rank,
               "rank {} cannot send to peer {} (world size {})", options_.rank, peer,
               options_.size);
  auto op = std::make_shared<Op>(this, peer, true, tag, sig, const_cast<std::byte*>(data.data()),
                                 data.size());
  std::lock_guard lock(mu_);
  Peer& p = peers_[peer];
  std::exception_ptr refusal = refusal_locked(p, tag, sig);
  if (!refusal && p.lost) refusal = p.lost;
  if (!refusal && !p.broken.empty() && !p.gone && !p.said_goodbye) {
    // Its endpoint failed and the control channel has not settled it yet:
    // the send waits for that verdict (nothing can go now), so that nothing
    // is decided here on a guess (a call's last have may be such a send).
    op->stranded = true;
    adopt(op);
    return op;
  }
  if (!refusal && (p.gone || p.said_goodbye || !p.ep))
    refusal = io_error(CHORUS_ERR_PEER_FAILURE, fmt::format("rank {} cannot send to rank {}: it "
                                                            "has left the job",
                                                            options_.rank, peer));
  if (refusal) {
    op->completion().fail(refusal);
    return op;
  }
  const bool bulk = data.size() >= options_.zero_copy_min;
  op->header = make_lead(job_, data.size(), bulk, sig);
  adopt(op);
  const uint64_t lead_tag = make_tag(TagKind::lead, options_.rank, tag);
  auto param = send_param(op.get(), on_send_lead);
  if (bulk || data.empty()) {
    track_send(op, ucp_tag_send_nbx(p.ep, &op->header, sizeof(LeadHeader), lead_tag, &param),
               Part::lead);
  } else {
    op->iov[0] = {&op->header, sizeof(LeadHeader)};
    op->iov[1] = {op->data, data.size()};
    use_iov(param);
    track_send(op, ucp_tag_send_nbx(p.ep, op->iov, 2, lead_tag, &param), Part::lead);
  }
  if (bulk) {
    auto bulk_param = send_param(op.get(), on_send_bulk);
    track_send(op,
               ucp_tag_send_nbx(p.ep, op->data, data.size(),
                                make_tag(TagKind::bulk, options_.rank, tag), &bulk_param),
               Part::bulk);
  }
  process_events_locked();
  return op;
}

void UcxTransport::track_send(const OpPtr& op, ucs_status_ptr_t request, Part part) {
  ++op->sends_left;
  if (request != nullptr && !UCS_PTR_IS_ERR(request)) {
    (part == Part::lead ? op->lead : op->bulk) = request;
    return;
  }
  // Ended at once: its event says how.
  ucs_status_t status = request == nullptr ? UCS_OK : UCS_PTR_STATUS(request);
  if (request == nullptr && send_error_for_test_ && send_error_for_test_->first == op->peer())
    status = std::exchange(send_error_for_test_, std::nullopt)->second;
  events_.push_back({op.get(), part, nullptr, status, 0, 0, op->peer()});
}

RequestPtr UcxTransport::irecv(int peer, uint32_t tag, const CallSignature& sig,
                               std::span<std::byte> data) {
  CHORUS_CHECK(peer >= 0 && peer < options_.size && peer != options_.rank,
               "rank {} cannot receive from peer {} (world size {})", options_.rank, peer,
               options_.size);
  auto op = std::make_shared<Op>(this, peer, false, tag, sig, data.data(), data.size());
  std::lock_guard lock(mu_);
  Peer& p = peers_[peer];
  if (std::exception_ptr refusal = refusal_locked(p, tag, sig)) {
    op->completion().fail(refusal);
    return op;
  }
  adopt(op);
  op->in_order = true;
  p.recv_order[tag].push_back(op.get());
  const uint64_t lead_tag = make_tag(TagKind::lead, peer, tag);
  auto param = recv_param(op.get(), on_recv_lead);
  ucs_status_ptr_t request;
  if (data.empty()) {
    request =
        ucp_tag_recv_nbx(worker_, &op->header, sizeof(LeadHeader), lead_tag, kFullMask, &param);
  } else {
    op->iov[0] = {&op->header, sizeof(LeadHeader)};
    op->iov[1] = {op->data, data.size()};
    use_iov(param);
    request = ucp_tag_recv_nbx(worker_, op->iov, 2, lead_tag, kFullMask, &param);
  }
  if (UCS_PTR_IS_ERR(request))
    events_.push_back({op.get(), Part::lead, nullptr, UCS_PTR_STATUS(request), 0, 0, peer});
  else
    op->lead = request;
  if (op->lead && (p.said_goodbye || p.gone)) {
    // What the peer sent before its goodbye (or death) still matches (the
    // cancel does nothing then); anything else never comes.
    op->cancel_error =
        p.lost ? p.lost
               : io_error(CHORUS_ERR_PEER_FAILURE,
                          fmt::format("rank {} cannot receive from rank {}: it has left the job",
                                      options_.rank, peer));
    ucp_request_cancel(worker_, op->lead);
  }
  process_events_locked();
  return op;
}

// The bulk receive goes straight into the user's buffer (contiguous, so UCX's
// rendezvous is zero-copy).
void UcxTransport::post_bulk_recv_locked(Op* op) {
  auto param = recv_param(op, on_recv_bulk);
  auto request =
      ucp_tag_recv_nbx(worker_, op->data, op->bytes(),
                       make_tag(TagKind::bulk, op->peer(), op->tag()), kFullMask, &param);
  if (UCS_PTR_IS_ERR(request))
    events_.push_back({op, Part::bulk, nullptr, UCS_PTR_STATUS(request), 0, 0, op->peer()});
  else if (request == nullptr)
    events_.push_back({op, Part::bulk, nullptr, UCS_OK, op->bytes(), 0, op->peer()});
  else
    op->bulk = request;
}

// Swallows the bulk message of a lead whose receive failed (UCX drops it as
// truncated; the sender completes), so that later messages stay in step.
void UcxTransport::post_drain_locked(int peer, uint32_t tag) {
  auto op = std::make_shared<Op>(this, peer, false, tag, CallSignature{}, nullptr, 0);
  op->drain = true;
  adopt(op);
  post_bulk_recv_locked(op.get());
}

void UcxTransport::post_control_recv_locked() {
  auto param = recv_param(this, on_recv_control);
  auto request = ucp_tag_recv_nbx(worker_, &control_msg_, sizeof control_msg_,
                                  make_tag(TagKind::control, 0, 0), kKindMask, &param);
  if (UCS_PTR_IS_ERR(request)) {
    log().error("rank {}: posting the control receive failed: {}", options_.rank,
                ucs_status_string(UCS_PTR_STATUS(request)));
    return;
  }
  control_req_ = request;
}

UcxTransport::OpPtr UcxTransport::send_control_locked(int peer, ControlType type, int32_t code,
                                                      const std::string& reason) {
  auto op = std::make_shared<Op>(this, peer, true, 0, CallSignature{}, nullptr, 0);
  op->control = true;
  ControlHeader h = make_control(type, job_);
  h.code = code;
  h.length = static_cast<uint32_t>(std::min(reason.size(), kMaxReason));
  if (type == ControlType::hello) {
    h.pid = self_pid_;
    h.start_time = self_start_;
    std::memcpy(h.boot_id, boot_id_.data(), std::min(boot_id_.size(), sizeof h.boot_id - 1));
  }
  op->owned.resize(sizeof h + h.length);
  std::memcpy(op->owned.data(), &h, sizeof h);
  std::memcpy(op->owned.data() + sizeof h, reason.data(), h.length);
  Peer& p = peers_[peer];
  adopt(op);
  auto param = send_param(op.get(), on_send_lead);
  track_send(op,
             ucp_tag_send_nbx(
                 p.ep, op->owned.data(), op->owned.size(),
                 make_tag(TagKind::control, options_.rank, static_cast<uint32_t>(type)), &param),
             Part::lead);
  return op;
}

void UcxTransport::adopt(const OpPtr& op) {
  peers_[op->peer()].ops.emplace(op.get(), op);
  ++live_ops_;
}

void UcxTransport::release_op(Op* op) {
  if (op->lead || op->bulk || op->in_order || op->sends_left > 0) return;
  if (op->stranded && !op->done()) return;            // fail_all_locked may still fail it
  if (peers_[op->peer()].ops.erase(op)) --live_ops_;  // may destroy *op
}

// ---- Events.

bool UcxTransport::progress_locked() {
  bool any = false;
  for (int i = 0; i < 256 && ucp_worker_progress(worker_) != 0; ++i) any = true;
  if (!events_.empty()) any = true;
  process_events_locked();
  for (auto it = closing_eps_.begin(); it != closing_eps_.end();) {
    if (ucp_request_check_status(*it) == UCS_INPROGRESS) {
      ++it;
    } else {
      ucp_request_free(*it);
      it = closing_eps_.erase(it);
    }
  }
  watch_peers_locked();
  if (notices_pending_ && !flushing_) flush_notices_locked();
  return any;
}

void UcxTransport::process_events_locked() {
  {
    std::lock_guard errors(ep_errors_mu_);
    for (auto [peer, status] : ep_errors_)
      events_.push_back({nullptr, Part::ep_error, nullptr, status, 0, 0, peer});
    ep_errors_.clear();
  }
  bool drained = false;
  while (true) {
    while (!events_.empty()) {
      std::vector<Event> batch;
      batch.swap(events_);
      for (const Event& e : batch) handle_event(e);
    }
    if (deaths_.empty()) break;
    if (!drained) {
      // Whatever a dead peer sent that UCX holds (shared memory it wrote,
      // frames read) is handled before its death is.
      for (int i = 0; i < 4096 && ucp_worker_progress(worker_) != 0; ++i) {
      }
      drained = true;
      continue;
    }
    auto [peer, why] = std::move(deaths_.front());
    deaths_.erase(deaths_.begin());
    peer_failed_locked(peer, why, true);
  }
  if (wake_pending_) {
    wake_pending_ = false;
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
  }
}

void UcxTransport::handle_event(const Event& e) {
  if (e.part == Part::ep_error) {
    lose_connection_locked(e.peer,
                           fmt::format("UCX reports '{}' on the endpoint from rank {} to rank {}",
                                       ucs_status_string(e.status), options_.rank, e.peer));
    return;
  }
  if (e.part == Part::control) {
    if (e.request) ucp_request_free(e.request);
    control_req_ = nullptr;
    int peer = tag_rank(e.sender_tag);
    if (e.status == UCS_OK) {
      handle_control(peer, control_msg_, e.length);
    } else if (e.status != UCS_ERR_CANCELED && peer >= 0 && peer < options_.size &&
               peer != options_.rank) {
      std::string why = fmt::format("its control message to rank {} failed: {}", options_.rank,
                                    ucs_status_string(e.status));
      if (ends_with_endpoint(e.status) && control_settles_locked(peers_[peer]))
        lose_connection_locked(peer, why);
      else
        peer_failed_locked(peer, why);
    }
    if (!tearing_down_ && e.status != UCS_ERR_CANCELED) post_control_recv_locked();
    return;
  }
  Op* op = e.op;
  (e.part == Part::lead ? op->lead : op->bulk) = nullptr;
  if (e.request) ucp_request_free(e.request);
  // UCX may end a request with its endpoint's error before it reports the
  // endpoint (a send that timed out): the endpoint failed all the same.
  if (ends_with_endpoint(e.status) && (op->is_send() || e.part == Part::bulk) &&
      control_settles_locked(peers_[op->peer()]))
    lose_connection_locked(
        op->peer(), fmt::format("UCX reports '{}' on a {} between rank {} and rank {}",
                                ucs_status_string(e.status), op->is_send() ? "send" : "receive",
                                options_.rank, op->peer()));
  if (op->is_send()) {
    Peer& p = peers_[op->peer()];
    if (e.status != UCS_OK && !op->done() && awaits_verdict_locked(p)) {
      op->stranded = true;  // ended with its peer's endpoint: the control channel settles it
    } else if (e.status != UCS_OK && !op->done()) {
      std::exception_ptr error = failure_.error ? failure_.error : p.failure;
      if (!error && (p.said_goodbye || p.gone)) error = gone_error(op->peer());
      if (!error)
        error = io_error(CHORUS_ERR_PEER_FAILURE,
                         fmt::format("rank {}: sending to rank {} failed: UCX reports '{}'",
                                     options_.rank, op->peer(), ucs_status_string(e.status)));
      fail_op(op, error);
    }
    if (--op->sends_left == 0) {
      if (!op->done() && !op->stranded) complete_op(op);
      release_op(op);
    }
    return;
  }
  if (e.part == Part::lead) {
    op->lead_done = true;
    op->lead_status = e.status;
    op->lead_length = e.length;
    advance_order_locked(op->peer(), op->tag());
    return;
  }
  if (!op->drain) {
    if (e.status == UCS_OK && e.length == op->bytes()) {
      complete_op(op);
    } else if (e.status != UCS_OK && !op->cancel_error &&
               awaits_verdict_locked(peers_[op->peer()])) {
      op->stranded = true;  // UCX ended the rendezvous with the failed endpoint
    } else if (e.status == UCS_ERR_CANCELED) {
      fail_op(op, op->cancel_error ? op->cancel_error : failure_.error);
    } else {
      fail_op(op, io_error(CHORUS_ERR_PEER_FAILURE,
                           fmt::format("rank {}: receiving {} bytes from rank {} failed: {}",
                                       options_.rank, op->bytes(), op->peer(),
                                       e.status == UCS_OK ? "short message"
                                                          : ucs_status_string(e.status))));
    }
  }
  release_op(op);
}

// Leads are handled in the order their receives were posted, so that bulk
// receives of one (peer, tag) are posted in issue order too.
void UcxTransport::advance_order_locked(int peer, uint32_t tag) {
  auto& order = peers_[peer].recv_order;
  auto it = order.find(tag);
  if (it == order.end()) return;
  while (!it->second.empty() && it->second.front()->lead_done) {
    Op* op = it->second.front();
    it->second.pop_front();
    op->in_order = false;
    finish_lead_locked(op);
  }
  if (it->second.empty()) order.erase(it);
}

void UcxTransport::finish_lead_locked(Op* op) {
  const int peer = op->peer();
  Peer& p = peers_[peer];
  const LeadHeader& h = op->header;
  if (op->lead_status == UCS_OK) {
    if (auto error = validate_lead(h, op->lead_length, job_)) {
      if (!op->done())
        fail_op(op, io_error(CHORUS_ERR_PEER_FAILURE,
                             fmt::format("peer failure: rank {} sent rank {} a malformed message "
                                         "({})",
                                         peer, options_.rank, *error)));
      peer_failed_locked(
          peer, fmt::format("it sent rank {} a malformed message ({})", options_.rank, *error));
    } else {
      const bool bulk = h.flags & kFlagBulk;
      if (op->done()) {
        // Failed meanwhile (fail_peer, abort): keep the stream in step if it goes on.
        if (bulk && !failure_.error && !p.failure && !p.gone) post_drain_locked(peer, op->tag());
      } else if (!(h.sig == op->signature()) || h.length != op->bytes()) {
        fail_op(op, mismatch_error(peer, h.sig, h.length, op->signature(), op->bytes()));
        if (bulk) post_drain_locked(peer, op->tag());
      } else if (bulk) {
        post_bulk_recv_locked(op);
        return;
      } else {
        complete_op(op);
      }
    }
  } else if (op->lead_status == UCS_ERR_MESSAGE_TRUNCATED) {
    // Larger than [header | buffer]: UCX wrote nothing. Only the size is known.
    std::size_t theirs =
        op->lead_length > sizeof(LeadHeader) ? op->lead_length - sizeof(LeadHeader) : 0;
    fail_op(op,
            io_error(CHORUS_ERR_MISMATCH,
                     fmt::format("rank {} sent {} bytes but rank {} expected {} bytes for {}", peer,
                                 theirs, options_.rank, op->bytes(), describe(op->signature()))));
  } else if (!op->cancel_error && awaits_verdict_locked(p)) {
    op->stranded = true;  // ended with the peer's failed endpoint
  } else if (op->lead_status == UCS_ERR_CANCELED) {
    fail_op(op, op->cancel_error ? op->cancel_error : failure_.error);
  } else {
    fail_op(op, io_error(CHORUS_ERR_PEER_FAILURE,
                         fmt::format("rank {}: receiving from rank {} failed: UCX reports '{}'",
                                     options_.rank, peer, ucs_status_string(op->lead_status))));
  }
  release_op(op);
}

void UcxTransport::complete_op(Op* op) {
  op->completion().complete();
  if (sleepers_.load(std::memory_order_seq_cst) != 0) wake_pending_ = true;
}

// Fails the request now; a receive is cancelled inside UCX (a receive UCX has
// already matched cannot be: it completes, into the buffer, when its data is in).
void UcxTransport::fail_op(Op* op, std::exception_ptr error) {
  if (!error)
    error = io_error(CHORUS_ERR_INTERNAL,
                     fmt::format("rank {}: a UCX request was cancelled", options_.rank));
  if (!op->cancel_error) op->cancel_error = error;
  if (!op->done()) {
    op->completion().fail(error);
    if (sleepers_.load(std::memory_order_seq_cst) != 0) wake_pending_ = true;
  }
  if (!op->is_send()) {
    if (op->lead) ucp_request_cancel(worker_, op->lead);
    if (op->bulk) ucp_request_cancel(worker_, op->bulk);
  }
}

std::exception_ptr UcxTransport::mismatch_error(int peer, const CallSignature& theirs,
                                                std::size_t their_bytes, const CallSignature& mine,
                                                std::size_t my_bytes) const {
  return io_error(CHORUS_ERR_MISMATCH,
                  mismatch_message(peer, theirs, their_bytes, options_.rank, mine, my_bytes));
}

std::exception_ptr UcxTransport::left_error(int peer) const {
  return io_error(CHORUS_ERR_PEER_FAILURE,
                  fmt::format("rank {} left (destroyed its communicator) while rank {} still "
                              "expected data from it",
                              peer, options_.rank));
}

}  // namespace chorus::ucx
