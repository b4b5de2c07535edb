// Data path of the TCP transport: sends, posting receives, progress and
// closing (the receive side of the socket is in tcp_receive.cpp, failures
// and where the peers are in tcp_failure.cpp).
#include "transports/tcp/tcp_transport.hpp"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "transports/tcp/epoll_ids.hpp"

namespace chorus::tcp {

spdlog::logger& log() {
  static spdlog::logger& subsystem = logger("tcp");  // the registry locks a mutex
  return subsystem;
}

TcpTransport::~TcpTransport() {
  try {
    close();
  } catch (const std::exception& e) {
    log().warn("rank {}: error while closing: {}", options_.rank, e.what());
  }
  stop_ = true;
  wake_epoll();
  if (progress_.joinable()) progress_.join();
}

void TcpTransport::wake_epoll() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_.get(), &one, sizeof one);
}

RequestPtr TcpTransport::isend(int peer, uint32_t tag, const CallSignature& sig,
                               std::span<const std::byte> data) {
  SendOp op;
  op.data = data;
  return send_data(peer, tag, sig, std::move(op));
}

RequestPtr TcpTransport::isend_gather(int peer, uint32_t tag, const CallSignature& sig,
                                      std::span<const std::span<const std::byte>> pieces) {
  SendOp op;
  op.pieces.reserve(pieces.size());
  for (const auto& piece : pieces)
    if (!piece.empty()) op.pieces.push_back(piece);
  return send_data(peer, tag, sig, std::move(op));
}

std::size_t TcpTransport::SendOp::payload_bytes() const {
  std::size_t bytes = 0;
  for_each_payload([&](std::span<const std::byte> s) { bytes += s.size(); });
  return bytes;
}

RequestPtr TcpTransport::send_data(int peer, uint32_t tag, const CallSignature& sig, SendOp op) {
  CHORUS_CHECK(peer >= 0 && peer < options_.size && peer != options_.rank,
               "rank {} cannot send to peer {} (world size {})", options_.rank, peer,
               options_.size);
  const std::size_t bytes = op.payload_bytes();
  auto request = std::make_shared<Request>(peer, true, tag, sig, bytes);
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
  op.header = make_frame(FrameType::data, tag, bytes, sig);
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
                                                 const RecvTarget& target) {
  auto& queue = peers_[peer].unexpected[request->tag()];
  Unexpected msg = std::move(queue.front());
  queue.pop_front();
  const CallSignature& sig = request->signature();
  if (!(msg.header.sig == sig) || msg.payload.size() != target.bytes) {
    request->completion().fail(
        mismatch_error(peer, msg.header.sig, msg.payload.size(), sig, target.bytes));
  } else {
    target.fill(msg.payload.data());
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
  RecvTarget target;
  target.buffer = data;
  target.bytes = data.size();
  return recv_data(peer, tag, sig, std::move(target));
}

RequestPtr TcpTransport::irecv_scatter(int peer, uint32_t tag, const CallSignature& sig,
                                       std::span<const std::span<std::byte>> pieces) {
  RecvTarget target;
  target.pieces.reserve(pieces.size());
  for (const auto& piece : pieces) {
    if (piece.empty()) continue;
    target.pieces.push_back(piece);
    target.bytes += piece.size();
  }
  return recv_data(peer, tag, sig, std::move(target));
}

RequestPtr TcpTransport::recv_data(int peer, uint32_t tag, const CallSignature& sig,
                                   RecvTarget target) {
  CHORUS_CHECK(peer >= 0 && peer < options_.size && peer != options_.rank,
               "rank {} cannot receive from peer {} (world size {})", options_.rank, peer,
               options_.size);
  auto request = std::make_shared<Request>(peer, false, tag, sig, target.bytes);
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
      return irecv_unexpected_locked(peer, request, target);
    if (!p.rx.awaiting_recv) break;
    if (p.rx.header.tag == tag) {
      // The frame held back in the socket is this receive's: read it into place.
      RxState& rx = p.rx;
      rx.awaiting_recv = false;
      if (!(rx.header.sig == sig) || rx.length != target.bytes) {
        request->completion().fail(
            mismatch_error(peer, rx.header.sig, rx.length, sig, target.bytes));
      } else {
        rx.aim(std::move(target));
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
  p.posted[tag].push_back(PostedRecv{request, std::move(target)});
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

// Unlike poll(), waits for the lock: the caller must not go on before the
// input is read. A few rounds, since a level-triggered socket whose next
// frame waits for a receive not yet posted stays ready.
void TcpTransport::drain_input() {
  constexpr int kRounds = 4;
  std::lock_guard lock(mu_);
  epoll_event events[64];
  for (int round = 0; round < kRounds; ++round) {
    const int count = epoll_wait(epoll_fd_.get(), events, 64, 0);
    if (count <= 0) return;
    process_events(events, count);
  }
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
    if (count > 0) {
      process_events(events, count);
      // A waiter that began after the check above may have found its request
      // not done and gone to sleep in epoll on the input just taken here:
      // nothing else would wake it before its timeout.
      if (spinners_.load(std::memory_order_seq_cst) != 0) wake_epoll();
    }
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
      if (!peers_[peer].send_failed.empty()) peer_lost(peer, peers_[peer].send_failed);
    }
  }
}

// Writes as much of the peer's send queue as the socket takes, gathering
// several frames into one sendmsg.
void TcpTransport::flush(int peer) {
  Peer& p = peers_[peer];
  while (!p.sendq.empty() && !p.gone && p.send_failed.empty()) {
    iovec iov[kMaxIov];
    int n_iov = 0;
    for (auto it = p.sendq.begin(); it != p.sendq.end() && n_iov + 2 <= kMaxIov; ++it) {
      std::size_t header_left = it->sent < sizeof(FrameHeader) ? sizeof(FrameHeader) - it->sent : 0;
      if (header_left > 0)
        iov[n_iov++] = {reinterpret_cast<std::byte*>(&it->header) + it->sent, header_left};
      // The payload's spans past what was written, as many as fit.
      std::size_t skip = it->sent > sizeof(FrameHeader) ? it->sent - sizeof(FrameHeader) : 0;
      bool whole = true;
      it->for_each_payload([&](std::span<const std::byte> s) {
        if (skip >= s.size()) {
          skip -= s.size();
          return;
        }
        if (n_iov == kMaxIov) {
          whole = false;
          return;
        }
        iov[n_iov++] = {const_cast<std::byte*>(s.data()) + skip, s.size() - skip};
        skip = 0;
      });
      if (!whole) break;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(n_iov);
    ssize_t written = ::sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (written < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      // Where there is input left, it is read first and the loss settled
      // after it (process_events: epoll reports the socket until then), so
      // that a peer that said goodbye, or failed and said why, before it
      // reset the connection is taken for what it said (a stopped rank's
      // first act on resuming may be a send to a peer that has since left).
      const std::string why = errno_message("send failed", errno);
      pollfd readable{p.fd.get(), POLLIN | POLLRDHUP, 0};
      if (::poll(&readable, 1, 0) == 1) {
        p.send_failed = why;
        break;
      }
      peer_lost(peer, why);
      return;
    }
    auto left = static_cast<std::size_t>(written);
    while (!p.sendq.empty()) {
      SendOp& op = p.sendq.front();
      const std::size_t total = sizeof(FrameHeader) + op.payload_bytes();
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
  const bool writing = !p.sendq.empty() && p.send_failed.empty();
  uint32_t events = EPOLLRDHUP | (p.rx.awaiting_recv ? 0u : EPOLLIN) | (writing ? EPOLLOUT : 0u);
  if (events == p.events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = static_cast<uint64_t>(peer);
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, p.fd.get(), &ev);
  p.events = events;
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
  bool handed_over = false;
  while (true) {
    {
      std::lock_guard lock(mu_);
      bool sent = true, goodbyes = true;
      for (int peer = 0; peer < options_.size; ++peer) {
        const Peer& p = peers_[peer];
        // failure: isolated; send_failed: nothing more goes out, and its
        // loss is settled once its input is read
        if (peer == options_.rank || p.gone || p.failure || !p.send_failed.empty()) continue;
        if (!p.sendq.empty()) sent = false;
        if (!p.said_goodbye) goodbyes = false;
      }
      if (sent && goodbyes) return;
      if (deadline.expired() || (sent && handed_over)) {
        if (handed_over || options_.isolate_peer_failures) {
          log().warn("rank {}: closing without every peer's goodbye after {} s", options_.rank,
                     wait_s);
          return;
        }
        hand_over_results_locked();
        handed_over = true;
        deadline = Deadline::after(std::chrono::seconds(1));  // for those frames to go out
      }
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::microseconds(20000));
  }
}

// A peer that has not said goodbye may still be in a call this rank
// finished, and fail it after this rank has left (its deadline passed on a
// third rank that did not answer its ask): it then takes the result from
// what this rank hands it now, as an answer to an ask (tcp_recover.cpp).
// Only then: a job that closes in step sends nothing more than goodbyes.
void TcpTransport::hand_over_results_locked() {
  const std::vector<CallBoard::KeptResult> finished = board().parting();
  for (int peer = 0; peer < options_.size; ++peer) {
    Peer& p = peers_[peer];
    if (peer == options_.rank || p.gone || !p.fd || p.said_goodbye || !p.send_failed.empty())
      continue;
    for (const auto& r : finished) {
      SendOp result;
      result.header =
          make_frame(FrameType::answer, r.space << Spared::kSpaceShift, r.bytes.size(), r.sig);
      result.header.flags = kAnswerFinished;
      result.owned = r.bytes;
      enqueue_locked(peer, std::move(result));
    }
  }
}

}  // namespace chorus::tcp
