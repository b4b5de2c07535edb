// Data path of the TCP transport: sends, posting receives, progress, failure
// (the receive side of the socket is in tcp_receive.cpp).
#include "transports/tcp/tcp_transport.hpp"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "transports/tcp/epoll_ids.hpp"

namespace chorus::tcp {

spdlog::logger& log() {
  static spdlog::logger& subsystem = logger("tcp");  // the registry locks a mutex
  return subsystem;
}

namespace {

constexpr int kMaxIov = 32;

}  // namespace

TcpTransport::~TcpTransport() {
  try {
    close();
  } catch (const std::exception& e) {
    log().warn("rank {}: error while closing: {}", options_.rank, e.what());
  }
  stop_ = true;
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_.get(), &one, sizeof one);
  if (progress_.joinable()) progress_.join();
}

RequestPtr TcpTransport::isend(int peer, uint32_t tag, const CallSignature& sig,
                               std::span<const std::byte> data) {
  CHORUS_CHECK(peer >= 0 && peer < options_.size && peer != options_.rank,
               "rank {} cannot send to peer {} (world size {})", options_.rank, peer,
               options_.size);
  auto request = std::make_shared<Request>(peer, true, tag, sig, data.size());
  std::lock_guard lock(mu_);
  if (refused_locked(tag, sig)) {
    request->completion().fail(failure_.error);
    return request;
  }
  if (peers_[peer].failure) {
    request->completion().fail(peers_[peer].failure);
    return request;
  }
  if (peers_[peer].lost) {
    request->completion().fail(peers_[peer].lost);
    return request;
  }
  if ((peers_[peer].gone && !peers_[peer].probe) || peers_[peer].said_goodbye) {
    request->completion().fail(io_error(
        CHORUS_ERR_PEER_FAILURE,
        fmt::format("rank {} cannot send to rank {}: it has left the job", options_.rank, peer)));
    return request;
  }  // a probed peer's sends wait (unsent) until the probe settles them
  SendOp op;
  op.header = make_frame(FrameType::data, tag, data.size(), sig);
  op.data = data;
  op.request = request;
  enqueue_locked(peer, std::move(op));
  return request;
}

void TcpTransport::enqueue_locked(int peer, SendOp op) {
  Peer& p = peers_[peer];
  p.sendq.push_back(std::move(op));
  if (p.sendq.size() == 1) flush(peer);  // try at once: no thread hand-off for small sends
}

RequestPtr TcpTransport::irecv_unexpected_locked(int peer, const RequestPtr& request,
                                                 std::span<std::byte> data) {
  auto& queue = peers_[peer].unexpected[request->tag()];
  Unexpected msg = std::move(queue.front());
  queue.pop_front();
  const CallSignature& sig = request->signature();
  if (!(msg.header.sig == sig) || msg.payload.size() != data.size()) {
    request->completion().fail(
        mismatch_error(peer, msg.header.sig, msg.payload.size(), sig, data.size()));
  } else {
    if (!data.empty()) std::memcpy(data.data(), msg.payload.data(), data.size());
    request->completion().complete();
  }
  return request;
}

void TcpTransport::set_aside_parked(int peer) {
  RxState& rx = peers_[peer].rx;
  rx.awaiting_recv = false;
  rx.holding.resize(rx.length);
  rx.dst = rx.holding.data();
  rx.keep = true;
  update_interest(peer);
}

bool TcpTransport::has_posted_locked(const Peer& p) {
  for (const auto& [tag, queue] : p.posted)
    if (!queue.empty()) return true;
  return false;
}

RequestPtr TcpTransport::irecv(int peer, uint32_t tag, const CallSignature& sig,
                               std::span<std::byte> data) {
  CHORUS_CHECK(peer >= 0 && peer < options_.size && peer != options_.rank,
               "rank {} cannot receive from peer {} (world size {})", options_.rank, peer,
               options_.size);
  auto request = std::make_shared<Request>(peer, false, tag, sig, data.size());
  std::lock_guard lock(mu_);
  if (refused_locked(tag, sig)) {
    request->completion().fail(failure_.error);
    return request;
  }
  Peer& p = peers_[peer];
  if (p.failure) {
    request->completion().fail(p.failure);
    return request;
  }
  // Each round takes one frame off the peer's stream, so this ends.
  for (;;) {
    auto unexpected = p.unexpected.find(tag);
    if (unexpected != p.unexpected.end() && !unexpected->second.empty())
      return irecv_unexpected_locked(peer, request, data);
    if (!p.rx.awaiting_recv) break;
    if (p.rx.header.tag == tag) {
      // The frame held back in the socket is this receive's: read it into place.
      RxState& rx = p.rx;
      rx.awaiting_recv = false;
      if (!(rx.header.sig == sig) || rx.length != data.size()) {
        request->completion().fail(
            mismatch_error(peer, rx.header.sig, rx.length, sig, data.size()));
      } else {
        rx.dst = data.data();
        rx.request = request;
      }
      update_interest(peer);
      pump_rx(peer);
      return request;
    }
    // A frame of another tag is parked in the socket, and this receive's
    // frame (or the peer's goodbye) may be behind it: read it aside.
    set_aside_parked(peer);
    pump_rx(peer);
    if (refused_locked(tag, sig)) {
      request->completion().fail(failure_.error);
      return request;
    }
  }
  if (p.lost) {  // nothing more comes from it: what came is taken above
    request->completion().fail(p.lost);
    return request;
  }
  if ((p.gone && !p.probe) || p.said_goodbye) {
    request->completion().fail(
        io_error(CHORUS_ERR_PEER_FAILURE,
                 fmt::format("rank {} cannot receive from rank {}: it has left the job",
                             options_.rank, peer)));
    return request;
  }
  p.posted[tag].push_back(PostedRecv{request, data});
  return request;
}

bool TcpTransport::poll() {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  epoll_event events[64];
  int count = epoll_wait(epoll_fd_.get(), events, 64, 0);
  if (count <= 0) return false;
  process_events(events, count);
  return true;
}

void TcpTransport::spin_begin() {
  spinners_.fetch_add(1, std::memory_order_seq_cst);
}

// The last waiter returns to its caller, who often waits again soon: if
// nothing is in flight, the progress thread stays asleep (it wakes on its own
// within 50 ms) instead of being woken to fight the next spin. If sends are
// queued or receives posted, it must run now so that transfers overlap what
// the caller does next (a reduction).
void TcpTransport::spin_end() {
  if (spinners_.fetch_sub(1, std::memory_order_seq_cst) != 1) return;
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || io_in_flight_locked()) futex_wake_all(spinners_);
}

// The waiter sleeps in epoll itself (the progress thread stands aside while it
// does): one wake-up per message instead of two, which matters most when
// ranks outnumber cores.
void TcpTransport::wait_for_progress(Request& pending, std::chrono::nanoseconds timeout) {
  if (pending.done()) return;
  epoll_event events[64];
  int ms = static_cast<int>(
      std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()));
  int count = epoll_wait(epoll_fd_.get(), events, 64, ms);
  // The progress thread stands aside while this waiter sleeps: a probe's
  // deadline is checked here too, but the lock is taken only when needed.
  if (count <= 0 && probes_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(mu_);
  if (count > 0) process_events(events, count);
  expire_probes();
}

bool TcpTransport::io_in_flight_locked() const {
  for (const auto& p : peers_) {
    if (p.gone) continue;
    if (!p.sendq.empty() || p.rx.request) return true;
    for (const auto& [tag, queue] : p.posted)
      if (!queue.empty()) return true;
  }
  return false;
}

void TcpTransport::progress_loop() {
  epoll_event events[64];
  while (!stop_.load(std::memory_order_relaxed)) {
    // A spinning waiter does the I/O itself; sleep until it stops (bounded,
    // so strangers still expire and stop_ is still seen).
    if (uint32_t spinning = spinners_.load(std::memory_order_seq_cst); spinning != 0) {
      futex_wait(spinners_, spinning, std::chrono::milliseconds(50));
      continue;
    }
    int count = epoll_wait(epoll_fd_.get(), events, 64, 200);
    if (count > 0 && spinners_.load(std::memory_order_seq_cst) != 0) continue;
    std::lock_guard lock(mu_);
    if (count > 0) process_events(events, count);
    if (!strangers_.empty()) expire_strangers();
    expire_probes();
    report_parked_locked();
  }
}

void TcpTransport::process_events(const epoll_event* events, int count) {
  for (int i = 0; i < count; ++i) {
    uint64_t id = events[i].data.u64;
    if (id == kWakeId) {
      uint64_t value;
      [[maybe_unused]] auto n = ::read(wake_fd_.get(), &value, sizeof value);
    } else if (id == kListenId) {
      accept_strangers();
    } else if (is_stranger_id(id)) {
      int fd = stranger_fd(id);
      for (std::size_t s = 0; s < strangers_.size(); ++s)
        if (strangers_[s].fd.get() == fd) {
          service_stranger(s, false);
          break;
        }
    } else if (is_probe_id(id)) {
      service_probe(static_cast<int>(id & 0xffffffff), events[i].events);
    } else {
      int peer = static_cast<int>(id);
      if (peers_[peer].gone) continue;
      if (events[i].events & EPOLLOUT) flush(peer);
      if (peers_[peer].rx.awaiting_recv &&
          (events[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        // The peer is going away with a frame still waiting in the socket:
        // take it aside so that what follows it (an abort notice, the EOF)
        // is read and reported for what it is.
        set_aside_parked(peer);
      }
      if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) pump_rx(peer);
    }
  }
}

// Writes as much of the peer's send queue as the socket takes, gathering
// several frames into one sendmsg.
void TcpTransport::flush(int peer) {
  Peer& p = peers_[peer];
  while (!p.sendq.empty() && !p.gone) {
    iovec iov[kMaxIov];
    int n_iov = 0;
    for (auto it = p.sendq.begin(); it != p.sendq.end() && n_iov + 2 <= kMaxIov; ++it) {
      std::size_t header_left = it->sent < sizeof(FrameHeader) ? sizeof(FrameHeader) - it->sent : 0;
      if (header_left > 0)
        iov[n_iov++] = {reinterpret_cast<std::byte*>(&it->header) + it->sent, header_left};
      std::span<const std::byte> payload = it->owned.empty() ? it->data : std::span(it->owned);
      std::size_t payload_done =
          it->sent > sizeof(FrameHeader) ? it->sent - sizeof(FrameHeader) : 0;
      if (payload.size() > payload_done)
        iov[n_iov++] = {const_cast<std::byte*>(payload.data()) + payload_done,
                        payload.size() - payload_done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(n_iov);
    ssize_t written = ::sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (written < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      peer_lost(peer, errno_message("send failed", errno));
      return;
    }
    auto left = static_cast<std::size_t>(written);
    while (!p.sendq.empty()) {
      SendOp& op = p.sendq.front();
      std::size_t total =
          sizeof(FrameHeader) + (op.owned.empty() ? op.data.size() : op.owned.size());
      std::size_t take = std::min(left, total - op.sent);
      op.sent += take;
      left -= take;
      if (op.sent < total) break;
      if (op.request) op.request->completion().complete();
      p.sendq.pop_front();
    }
  }
  update_interest(peer);
}

void TcpTransport::update_interest(int peer) {
  Peer& p = peers_[peer];
  if (p.gone) return;
  uint32_t events =
      EPOLLRDHUP | (p.rx.awaiting_recv ? 0u : EPOLLIN) | (p.sendq.empty() ? 0u : EPOLLOUT);
  if (events == p.events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = static_cast<uint64_t>(peer);
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, p.fd.get(), &ev);
  p.events = events;
}

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
    if (i == 0 && op.sent > 0 && !op.data.empty() && op.owned.empty()) {
      op.owned.assign(op.data.begin(), op.data.end());
      op.data = {};
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
    while (!p.gone && p.fd && notice_queued() && !deadline.expired()) {
      pollfd pfd{p.fd.get(), POLLOUT, 0};
      ::poll(&pfd, 1, deadline.poll_timeout_ms(100));
      flush(peer);
    }
  }
}

void TcpTransport::close() {
  {
    std::lock_guard lock(mu_);
    if (closing_) return;
    closing_ = true;
    for (int peer = 0; peer < options_.size; ++peer) {
      Peer& p = peers_[peer];
      if (peer == options_.rank || p.gone || !p.fd) continue;
      SendOp op;
      op.header = make_frame(FrameType::goodbye, 0, 0, CallSignature{});
      enqueue_locked(peer, std::move(op));
    }
  }
  // Wait (bounded) until our frames are out and every peer said goodbye, so
  // that closing the sockets never resets a peer that is still reading.
  double wait_s;
  {
    std::lock_guard lock(mu_);
    // A failed job only flushes its abort.
    wait_s = failure_ ? 2.0 : options_.close_timeout_s;
  }
  auto deadline = Deadline::after(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(wait_s)));
  auto backoff = std::chrono::microseconds(50);
  while (true) {
    {
      std::lock_guard lock(mu_);
      bool settled = true;
      for (int peer = 0; peer < options_.size; ++peer) {
        const Peer& p = peers_[peer];
        if (peer == options_.rank || p.gone || p.failure) continue;  // failure: isolated
        if (!p.sendq.empty() || !p.said_goodbye) settled = false;
      }
      if (settled) return;
      if (deadline.expired()) {
        log().warn("rank {}: closing without every peer's goodbye after {} s", options_.rank,
                   wait_s);
        return;
      }
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::microseconds(20000));
  }
}

}  // namespace chorus::tcp
