// Failures of the TCP transport and where its peers are: a lost peer, the
// failure of one peer or of every request (sparing what a failure spares),
// the abort notices sent to the peers, the checks a wait makes, and the
// announcements a long wait sends and the status frames that answer them
// (transports/call_board.hpp). Probing a lost peer: tcp_probe.cpp.
#include <poll.h>
#include <sys/epoll.h>

#include <cerrno>
#include <cstring>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace chorus::tcp {

void TcpTransport::peer_lost(int peer, const std::string& why) {
  Peer& p = peers_[peer];
  if (p.gone) return;
  p.gone = true;
  departed_.fetch_add(1, std::memory_order_release);
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, p.fd.get(), nullptr);
  if (closing_ || p.said_goodbye) {
    log().debug("rank {}: connection to rank {} ended: {}", options_.rank, peer, why);
    return;
  }
  if (options_.isolate_peer_failures) {
    const std::string message = lost_message(peer, why);
    log().warn("{}; the transport goes on without it", message);
    fail_peer_locked(peer, io_error(CHORUS_ERR_PEER_FAILURE, message));
    return;
  }
  // Dead, or alive with the connection dropped? Asked (tcp_probe.cpp), with
  // what its death would spare fixed now: the calls in progress here.
  if (start_probe(peer, why, board().started())) {
    log().debug("rank {}: connection to rank {} ended ({}): probing it", options_.rank, peer, why);
    return;
  }
  settle_dead(peer, why, board().started());
}

void TcpTransport::fail_requests_with_locked(Peer& p, std::exception_ptr error) {
  for (auto& [tag, queue] : p.posted)
    for (auto& recv : queue) recv.request->completion().fail(error);
  p.posted.clear();
  if (p.rx.request) {  // a frame cut short, or drained from now on
    p.rx.request->completion().fail(error);
    p.rx.request.reset();
  }
  drop_sends_locked(p, error, [](const RequestPtr&) { return false; });
}

void TcpTransport::fail_peer_locked(int peer, std::exception_ptr error) {
  Peer& p = peers_[peer];
  if (p.failure) return;
  p.failure = error;
  fail_requests_with_locked(p, error);
  p.unexpected.clear();
  p.rx.dst = nullptr;  // a frame still arriving drains into nothing, even a parked one
  p.rx.keep = false;
  if (p.rx.awaiting_recv) {
    p.rx.awaiting_recv = false;
    update_interest(peer);
  }
}

// Fails every request, now and later, but those of the calls failure_
// spares. A receive in progress keeps draining its frame from the socket, but
// no longer into the user's buffer.
void TcpTransport::fail_all_locked() {
  has_failure_.store(true, std::memory_order_release);
  auto spares = [&](const RequestPtr& r) {
    return failure_.spared.covers(r->tag(), r->signature());
  };
  for (auto& p : peers_) {
    for (auto& [tag, queue] : p.posted) {
      std::deque<PostedRecv> kept;
      for (auto& recv : queue) {
        if (spares(recv.request))
          kept.push_back(recv);
        else
          recv.request->completion().fail(failure_.error);
      }
      queue = std::move(kept);
    }
    // Unexpected frames stay: a spared call may still take them.
    if (p.rx.request && !spares(p.rx.request)) {
      p.rx.request->completion().fail(failure_.error);
      p.rx.request.reset();
      if (p.rx.in_payload) p.rx.dst = nullptr;
    }
    if (p.rx.in_payload && static_cast<FrameType>(p.rx.header.type) == FrameType::data &&
        !p.rx.request && !failure_.spared.covers(p.rx.header.tag, p.rx.header.sig)) {
      p.rx.dst = nullptr;  // drain the rest of an unexpected frame too
      p.rx.keep = false;
      if (p.rx.awaiting_recv) {
        p.rx.awaiting_recv = false;
        update_interest(static_cast<int>(&p - peers_.data()));
      }
    }
    drop_sends_locked(p, failure_.error, spares);  // spared sends go on
  }
}

// The frame at the front may be half written: it stays (with its own copy of
// the data) so the stream stays well-formed; the other dropped sends go.
void TcpTransport::drop_sends_locked(Peer& p, const std::exception_ptr& error,
                                     const std::function<bool(const RequestPtr&)>& spares) {
  std::deque<SendOp> keep;
  for (std::size_t i = 0; i < p.sendq.size(); ++i) {
    SendOp& op = p.sendq[i];
    if (op.request && spares(op.request)) {
      keep.push_back(std::move(op));
      continue;
    }
    if (op.request) op.request->completion().fail(error);
    if (i == 0 && op.sent > 0 && op.owned.empty() && op.payload_bytes() > 0) {
      std::vector<std::byte> copy;
      op.for_each_payload(
          [&](std::span<const std::byte> s) { copy.insert(copy.end(), s.begin(), s.end()); });
      op.owned = std::move(copy);
      op.data = {};
      op.pieces.clear();
    }
    if (i == 0 && op.sent > 0) {
      op.request.reset();
      keep.push_back(std::move(op));
    }
  }
  p.sendq = std::move(keep);
}

bool TcpTransport::has_unmatched_arrival(int peer, uint32_t tag) {
  CHORUS_CHECK(peer >= 0 && peer < options_.size, "no rank {} among {}", peer, options_.size);
  std::lock_guard lock(mu_);
  const Peer& p = peers_[static_cast<std::size_t>(peer)];
  auto it = p.unexpected.find(tag);
  if (it != p.unexpected.end() && !it->second.empty()) return true;
  return p.rx.awaiting_recv && p.rx.header.tag == tag;
}

void TcpTransport::check_failed() {
  if (!has_failure_.load(std::memory_order_acquire)) return;
  std::exception_ptr failure;
  {
    std::lock_guard lock(mu_);
    failure = failure_.error;
  }
  std::rethrow_exception(failure);
}

void TcpTransport::check_call(uint32_t tag, const CallSignature& sig) {
  if (!has_failure_.load(std::memory_order_acquire)) return;
  std::exception_ptr failure;
  {
    std::lock_guard lock(mu_);
    if (!refused_locked(tag, sig)) return;
    failure = failure_.error;
  }
  std::rethrow_exception(failure);
}

void TcpTransport::announce(int peer, uint32_t tag, const CallSignature& sig) {
  std::lock_guard lock(mu_);
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (failure_.error || p.gone || !p.fd) return;
  SendOp op;
  op.header = make_frame(FrameType::announce, tag, 0, sig);
  enqueue_locked(peer, std::move(op));
  report_parked_locked();  // this rank's waiters stand in for the progress thread
}

void TcpTransport::send_status_locked(int peer, uint32_t tag) {
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (failure_.error || p.gone || !p.fd) return;
  const CallProgress mine = board().progress(tag);
  const StatusPayload payload{mine.finished, mine.waiting_on, 0};
  SendOp op;
  op.header = make_frame(FrameType::status, tag, sizeof payload, mine.current);
  op.owned.resize(sizeof payload);
  std::memcpy(op.owned.data(), &payload, sizeof payload);
  enqueue_locked(peer, std::move(op));
  p.status_sent = Clock::now();
}

void TcpTransport::report_parked_locked() {
  const auto now = Clock::now();
  if (now < next_parked_check_) return;
  next_parked_check_ = now + kAnnounceAfter / 2;
  for (int peer = 0; peer < options_.size; ++peer) {
    const Peer& p = peers_[static_cast<std::size_t>(peer)];
    if (p.rx.awaiting_recv && now - p.rx.parked_since >= kAnnounceAfter &&
        now - p.status_sent >= kAnnounceAfter)
      send_status_locked(peer, p.rx.header.tag);
  }
}

// Called every kAnnounceAfter of a long wait: the lock is no cost there.
// A collective call is known by its tag space (its communicator) and
// number, not by its tag: the stages of a hierarchical call run on teams of
// their own tags, and ranks in different calls under one number can wait in
// stages of different teams (one in an allreduce's stage across hosts, the
// other in a broadcast's among the representatives), exchanging nothing.
// Point-to-point numbers count per peer and tag: there the tag must match.
void TcpTransport::check_announced(uint32_t tag, const CallSignature& sig) {
  const auto same_call = [&](uint32_t other_tag, const CallSignature& other) {
    const bool same_space = is_collective_tag(tag)
                                ? other_tag >> Spared::kSpaceShift == tag >> Spared::kSpaceShift
                                : other_tag == tag;
    return same_space && other.seq == sig.seq;
  };
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  for (int peer = 0; peer < options_.size; ++peer) {
    const Peer& p = peers_[static_cast<std::size_t>(peer)];
    const auto& a = p.announced;
    if (a && same_call(a->tag, a->sig) && !(a->sig == sig))
      throw IoError(CHORUS_ERR_MISMATCH, mismatch_message(peer, a->sig, 0, options_.rank, sig, 0));
    // A frame parked in the socket holds back whatever its sender sent
    // after it, its announcements and its failure notice included: a frame
    // of another call under this one's number is the mismatch itself (a
    // wait outside this transport, shared memory, posts no receive for it).
    const FrameHeader& parked = p.rx.header;
    if (p.rx.awaiting_recv && same_call(parked.tag, parked.sig) && !(parked.sig == sig))
      throw IoError(CHORUS_ERR_MISMATCH,
                    mismatch_message(peer, parked.sig, p.rx.length, options_.rank, sig, 0));
    // Anything else it holds back (a failure notice, an abort) this wait
    // would see only when the sender closes: a frame parked for as long as
    // this rank has waited is read aside into memory, as a receive of
    // another tag does, so the stream behind it flows again. Flow control
    // keeps a frame in the socket for a receiver that is busy; this one is
    // stuck in a call.
    if (p.rx.awaiting_recv && now - p.rx.parked_since >= kAnnounceAfter) set_aside_parked(peer);
  }
}

Spared TcpTransport::spared() const {
  std::lock_guard lock(mu_);
  return failure_.spared;
}

void TcpTransport::check_peer(int peer, uint32_t tag, const CallSignature& sig) {
  check_call(tag, sig);
  if (departed_.load(std::memory_order_acquire) == 0) return;
  CHORUS_CHECK(peer >= 0 && peer < options_.size, "no rank {} among {}", peer, options_.size);
  std::lock_guard lock(mu_);
  const Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (p.said_goodbye)
    throw IoError(CHORUS_ERR_PEER_FAILURE,
                  fmt::format("rank {} left (destroyed its communicator) while rank {} still "
                              "expected its part of a collective",
                              peer, options_.rank));
  if (p.gone && !p.probe)  // a probed peer may be alive: not settled yet
    throw IoError(CHORUS_ERR_PEER_FAILURE,
                  fmt::format("peer failure: rank {} failed: its connection to rank {} ended "
                              "while rank {} still expected its part of a collective",
                              peer, options_.rank, options_.rank));
}

void TcpTransport::fail(chorus_result_t code, const std::string& message, const Spared& spared) {
  std::lock_guard lock(mu_);
  fail_and_notify_locked(code, message, "", spared);
}

// Fails everything here and tells every live peer why (an ABORT frame that
// carries the result code), so that a rank which exits after a failure is
// never mistaken by the others for the rank that failed first.
//
// A later failure that spares less narrows what is spared (FailureRecord),
// fails what no longer is, and tells the peers again, with the first
// failure's code and message.
void TcpTransport::fail_and_notify_locked(chorus_result_t code, const std::string& message,
                                          const std::string& local_message, const Spared& spared) {
  if (!failure_.take(code, message, local_message, spared)) return;
  fail_all_locked();
  const std::string text = encode_notice(failure_.text, failure_.spared, kMaxAbortReason);
  auto is_notice = [](const SendOp& op) {
    return static_cast<FrameType>(op.header.type) == FrameType::abort;
  };
  for (int peer = 0; peer < options_.size; ++peer) {
    Peer& p = peers_[peer];
    if (peer == options_.rank || p.gone || !p.fd) continue;
    SendOp op;
    op.header = make_frame(FrameType::abort, static_cast<uint32_t>(failure_.code), text.size(),
                           CallSignature{});
    op.owned.assign(reinterpret_cast<const std::byte*>(text.data()),
                    reinterpret_cast<const std::byte*>(text.data()) + text.size());
    // Ahead of the spared sends (behind a frame already half written), so
    // that the peer learns of the failure first.
    auto at = p.sendq.begin();
    while (at != p.sendq.end() && (at->sent > 0 || is_notice(*at))) ++at;
    const bool was_empty = p.sendq.empty();
    p.sendq.insert(at, std::move(op));
    if (was_empty) flush(peer);
  }
  // Push the notices out now (bounded): the process may exit right after the
  // caller sees this error, and a notice still queued would be lost.
  auto deadline = Deadline::after(std::chrono::seconds(2));
  for (int peer = 0; peer < options_.size; ++peer) {
    Peer& p = peers_[peer];
    auto notice_queued = [&] { return std::any_of(p.sendq.begin(), p.sendq.end(), is_notice); };
    while (!p.gone && p.fd && p.send_failed.empty() && notice_queued() && !deadline.expired()) {
      pollfd pfd{p.fd.get(), POLLOUT, 0};
      ::poll(&pfd, 1, deadline.poll_timeout_ms(100));
      flush(peer);
    }
  }
}

}  // namespace chorus::tcp
