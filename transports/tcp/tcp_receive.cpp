// Receive path of the TCP transport: reading frames off a peer's socket,
// validating their headers, and delivering payloads to posted receives (large
// ones straight into the user's buffer) or to the unexpected queue.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace chorus::tcp {

void TcpTransport::RxState::aim(RecvTarget target) {
  piece = piece_at = 0;
  if (target.pieces.empty()) {
    dst = target.buffer.data();
    pieces.clear();
    return;
  }
  pieces = std::move(target.pieces);
  dst = pieces.front().data();
}

namespace {

// Moves a cursor (pieces[piece] at `at`) n bytes on through the pieces,
// copying those bytes there from src when it is given.
void advance_through(std::span<const std::span<std::byte>> pieces, std::size_t& piece,
                     std::size_t& at, std::size_t n, const std::byte* src) {
  while (n > 0) {
    const std::span<std::byte> into = pieces[piece];
    const std::size_t k = std::min(into.size() - at, n);
    if (src) {
      std::memcpy(into.data() + at, src, k);
      src += k;
    }
    n -= k;
    at += k;
    if (at == into.size()) {
      ++piece;
      at = 0;
    }
  }
}

}  // namespace

void TcpTransport::RecvTarget::fill(const std::byte* src) const {
  if (pieces.empty()) {
    if (bytes > 0) std::memcpy(buffer.data(), src, bytes);
    return;
  }
  std::size_t piece = 0, at = 0;
  advance_through(pieces, piece, at, bytes, src);
}

void TcpTransport::RxState::store(const std::byte* src, std::size_t n) {
  if (dst && pieces.empty())
    std::memcpy(dst + received, src, n);
  else if (dst)
    advance_through(pieces, piece, piece_at, n, src);
  received += n;
}

ssize_t TcpTransport::RxState::read_direct(int fd, std::size_t left, std::size_t& asked) {
  ssize_t n;
  if (pieces.empty()) {
    asked = left;
    n = ::recv(fd, dst + received, left, MSG_DONTWAIT);
  } else {
    iovec iov[kMaxIov];
    int n_iov = 0;
    asked = 0;
    std::size_t at = piece_at;
    for (std::size_t i = piece; i < pieces.size() && n_iov < kMaxIov && asked < left; ++i) {
      const std::size_t k = std::min(pieces[i].size() - at, left - asked);
      iov[n_iov++] = {pieces[i].data() + at, k};
      asked += k;
      at = 0;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(n_iov);
    n = ::recvmsg(fd, &msg, MSG_DONTWAIT);
  }
  if (n <= 0) return n;
  received += static_cast<std::size_t>(n);
  if (!pieces.empty())
    advance_through(pieces, piece, piece_at, static_cast<std::size_t>(n), nullptr);
  return n;
}

// Reads everything the socket has: headers and small payloads through the
// staging buffer, large payloads straight into their destination.
void TcpTransport::pump_rx(int peer) {
  Peer& p = peers_[peer];
  RxState& rx = p.rx;
  bool drained = false;  // a short read means the socket is empty: skip the EAGAIN call
  while (!p.gone && !rx.awaiting_recv) {
    std::size_t staged = rx.stage_end - rx.stage_begin;
    if (rx.in_payload) {
      std::size_t take = std::min(staged, rx.length - rx.received);
      if (take > 0) {
        rx.store(rx.stage.data() + rx.stage_begin, take);
        rx.stage_begin += take;
      }
      if (rx.received == rx.length) {
        finish_payload(peer);
        continue;
      }
      // The stage is empty here. Read big remainders straight into place.
      std::size_t left = rx.length - rx.received;
      if (rx.dst && left >= options_.zero_copy_min) {
        if (drained) return;
        std::size_t asked = 0;
        ssize_t n = rx.read_direct(p.fd.get(), left, asked);
        if (n > 0) {
          drained = static_cast<std::size_t>(n) < asked;
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        peer_lost(peer, n == 0 ? "connection closed" : errno_message("receive failed", errno));
        return;
      }
    } else if (staged >= sizeof(FrameHeader)) {
      on_header(peer);
      continue;
    }
    // Refill the staging buffer (keeping what is left of it).
    staged = rx.stage_end - rx.stage_begin;
    if (rx.stage_begin > 0) {
      std::memmove(rx.stage.data(), rx.stage.data() + rx.stage_begin, staged);
      rx.stage_begin = 0;
      rx.stage_end = staged;
    }
    if (drained) return;
    const std::size_t room = rx.stage.size() - rx.stage_end;
    ssize_t n = ::recv(p.fd.get(), rx.stage.data() + rx.stage_end, room, MSG_DONTWAIT);
    if (n > 0) {
      rx.stage_end += static_cast<std::size_t>(n);
      drained = static_cast<std::size_t>(n) < room;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n == 0 && p.said_goodbye && !rx.in_payload && staged == 0) {
      p.gone = true;  // clean close after the goodbye frame
      epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, p.fd.get(), nullptr);
      return;
    }
    peer_lost(peer, n == 0 ? "connection closed" : errno_message("receive failed", errno));
    return;
  }
}

void TcpTransport::on_header(int peer) {
  Peer& p = peers_[peer];
  RxState& rx = p.rx;
  auto bytes = std::span<const std::byte>(rx.stage.data() + rx.stage_begin, sizeof(FrameHeader));
  if (auto error = validate_frame(bytes)) {
    const std::string why = fmt::format("malformed frame: {}", *error);
    if (!options_.isolate_peer_failures && !closing_) {
      // The sender is alive, not dead: dropping its stream must not let it
      // take this rank for dead and finish a call this rank cannot (the
      // verdict round does not wait for a gone peer). So this is a failure
      // here, sparing only the calls this rank finished, and the notice
      // goes out on this rank's own stream to it, which is intact, before
      // the connection ends.
      fail_and_notify_locked(
          CHORUS_ERR_PEER_FAILURE,
          fmt::format("peer failure: rank {} sent rank {} a {}; the connection is dropped", peer,
                      options_.rank, why),
          "", board().spared());
    }
    peer_lost(peer, why);
    return;
  }
  std::memcpy(&rx.header, bytes.data(), sizeof(FrameHeader));
  rx.stage_begin += sizeof(FrameHeader);
  rx.in_payload = true;
  rx.length = rx.header.length;
  rx.received = 0;
  rx.dst = nullptr;
  rx.pieces.clear();
  rx.keep = false;
  rx.request.reset();
  auto type = static_cast<FrameType>(rx.header.type);
  // After a failure, only the frames of the calls it spares are delivered.
  const bool refused = type == FrameType::data && refused_locked(rx.header.tag, rx.header.sig);
  if (type == FrameType::data && !refused) {
    auto posted = p.posted.find(rx.header.tag);
    if (posted != p.posted.end() && !posted->second.empty()) {
      PostedRecv recv = std::move(posted->second.front());
      posted->second.pop_front();
      if (!(recv.request->signature() == rx.header.sig) || recv.target.bytes != rx.length) {
        recv.request->completion().fail(mismatch_error(
            peer, rx.header.sig, rx.length, recv.request->signature(), recv.target.bytes));
      } else {
        rx.aim(std::move(recv.target));
        rx.request = recv.request;
      }
      return;
    }
  }
  // Park a large unexpected frame in the socket only while no receive of
  // another tag waits on this peer: such a receive's frame may be behind it.
  if (type == FrameType::data && !refused && rx.length >= options_.hold_back_min &&
      !has_posted_locked(p)) {
    rx.awaiting_recv = true;
    rx.parked_since = Clock::now();
    update_interest(peer);
    return;
  }
  if (type != FrameType::goodbye && !refused) {
    rx.holding.resize(rx.length);
    rx.dst = rx.holding.data();
    rx.keep = true;
  }
}

void TcpTransport::finish_payload(int peer) {
  Peer& p = peers_[peer];
  RxState& rx = p.rx;
  rx.in_payload = false;
  switch (static_cast<FrameType>(rx.header.type)) {
    case FrameType::announce: {
      p.announced = rx.header;
      // The peer waits on this rank: tell it where this rank is (CallBoard).
      send_status_locked(peer, rx.header.tag);
      break;
    }
    case FrameType::status: {
      StatusPayload payload;
      std::memcpy(&payload, rx.holding.data(), sizeof payload);  // its length was checked
      CallProgress theirs{rx.header.sig, payload.finished, -1};
      if (payload.waiting_on >= 0 && payload.waiting_on < options_.size)
        theirs.waiting_on = payload.waiting_on;
      board().heard(peer, rx.header.tag, theirs);
      break;
    }
    case FrameType::ask:
      answer_ask_locked(peer, rx.header);
      break;
    case FrameType::answer:
      take_answer_locked(peer);
      break;
    case FrameType::goodbye: {
      p.said_goodbye = true;
      departed_.fetch_add(1, std::memory_order_release);
      auto error = io_error(CHORUS_ERR_PEER_FAILURE,
                            fmt::format("rank {} left (destroyed its communicator) while rank {} "
                                        "still expected data from it",
                                        peer, options_.rank));
      for (auto& [tag, queue] : p.posted)
        for (auto& recv : queue) recv.request->completion().fail(error);
      p.posted.clear();
      break;
    }
    case FrameType::abort: {
      // The reason is the peer's own first error; keep its code when it is one.
      std::string reason;
      Spared spared;
      if (!decode_notice({reinterpret_cast<const char*>(rx.holding.data()), rx.holding.size()},
                         reason, spared))
        reason = fmt::format("rank {} sent a malformed failure notice", peer);
      auto code = static_cast<chorus_result_t>(rx.header.tag);
      if (code <= CHORUS_SUCCESS || code >= CHORUS_RESULT_COUNT_) code = CHORUS_ERR_ABORTED;
      log().debug("rank {}: rank {} reports: {}", options_.rank, peer, reason);
      if (options_.isolate_peer_failures) {  // its failure, not this transport's
        fail_peer_locked(peer,
                         io_error(code, fmt::format("{} (reported by rank {})", reason, peer)));
        break;
      }
      // Pass it on unchanged, so every rank learns the first failure even if
      // the reporting rank exits before the others hear from it.
      fail_and_notify_locked(code, reason, fmt::format("{} (reported by rank {})", reason, peer),
                             spared);
      break;
    }
    case FrameType::data:
      if (rx.request) {
        rx.request->completion().complete();
      } else if (rx.keep && !refused_locked(rx.header.tag, rx.header.sig)) {
        // Arrived before its receive: match a receive posted meanwhile, or keep it.
        auto& queue = p.posted[rx.header.tag];
        Unexpected msg{rx.header, std::move(rx.holding)};
        if (!queue.empty()) {
          PostedRecv recv = queue.front();
          queue.pop_front();
          if (!(recv.request->signature() == msg.header.sig) ||
              recv.target.bytes != msg.payload.size()) {
            recv.request->completion().fail(mismatch_error(peer, msg.header.sig, msg.payload.size(),
                                                           recv.request->signature(),
                                                           recv.target.bytes));
          } else {
            recv.target.fill(msg.payload.data());
            recv.request->completion().complete();
          }
        } else {
          p.unexpected[msg.header.tag].push_back(std::move(msg));
        }
      }
      break;
  }
  rx.request.reset();
  rx.dst = nullptr;
  rx.pieces.clear();
  rx.keep = false;
  rx.holding = {};
}

std::exception_ptr TcpTransport::mismatch_error(int peer, const CallSignature& theirs,
                                                std::size_t their_bytes, const CallSignature& mine,
                                                std::size_t my_bytes) const {
  return io_error(CHORUS_ERR_MISMATCH,
                  mismatch_message(peer, theirs, their_bytes, options_.rank, mine, my_bytes));
}

}  // namespace chorus::tcp
