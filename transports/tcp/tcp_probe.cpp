// Probing a peer whose stream ended without a goodbye: dead, or alive with
// the connection dropped by the network?
//
// A dead rank's stream ends, and so does a live rank's when the network
// drops (resets) the connection. Taken for dead, a live peer would take this
// rank for dead too, and the verdict round (collectives/verdict/agree.hpp)
// waits for neither: each could finish a call the other fails. So before a
// lost peer is settled, this rank connects to the peer's listener and sends
// a probe: a Hello with purpose probe. Then:
//
//   refused, reset, closed before an answer, or no answer within
//   kProbeTimeout: dead (a dying process closes its listener with its other
//   sockets, so a connection that the kernel queued for it is reset). Its
//   death spares the calls in progress when its stream ended (peer_lost).
//
//   answered: alive. The answer is a HelloAck and an ABORT frame with what
//   the peer vouches for (CallBoard::vouch, encode_notice): per
//   communicator, the last call whose own part it has done (all it sends
//   and receives, with only the verdict round left), or finished. This rank
//   then sends what it vouches for the same way. Vouching seals: from then
//   on a rank does its part of no later call (part_done fails it), so what
//   it said stays true whoever asks, and when; and a dying peer, whose
//   queued connection is reset, gets this rank to vouch for nothing.
//   Both ends fail with PEER_FAILURE, sparing the calls this
//   rank finished and those that both vouched for. For such a call neither
//   needs anything more from the other but its have, which the network
//   lost: the exchange stands for it, and a gone peer that the failure
//   spares is not waited for. Both ends compute the same from the same two
//   answers, so they finish the call or fail it together, where taking each
//   other for dead could let one finish what the other fails. (One that
//   finished a call had the other's have, so the other vouched for it.)
//
// The peer answering a probe settles the same way, with the prober's
// calls, even when its own end of the connection has not seen the loss
// yet. Until a probe is settled, the peer's receives and sends stay
// pending and check_peer does not report it gone, so nothing is decided on
// a guess. Everything here runs with mu_ held, from the progress thread or a
// polling waiter; no step blocks (two live ranks probe each other at once).
#include <netdb.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "transports/tcp/epoll_ids.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace chorus::tcp {
namespace {

// A live peer's progress thread answers within milliseconds, even with its
// ranks outnumbering cores; a dead one's kernel refuses at once.
constexpr auto kProbeTimeout = std::chrono::seconds(2);

// The probe's own frame: an ABORT frame carrying `text` (an encoded notice).
std::vector<std::byte> notice_frame(const std::string& text) {
  const FrameHeader header =
      make_frame(FrameType::abort, CHORUS_ERR_PEER_FAILURE, text.size(), CallSignature{});
  std::vector<std::byte> out(sizeof header + text.size());
  std::memcpy(out.data(), &header, sizeof header);
  std::memcpy(out.data() + sizeof header, text.data(), text.size());
  return out;
}

// Bytes still missing from `in` for a notice frame starting at `at`; 0 when
// complete. Sets *error when the header is malformed or no notice.
std::size_t notice_missing(const std::vector<std::byte>& in, std::size_t at, std::string* error) {
  if (in.size() < at + sizeof(FrameHeader)) return at + sizeof(FrameHeader) - in.size();
  std::span<const std::byte> bytes(in.data() + at, sizeof(FrameHeader));
  if (auto bad = validate_frame(bytes)) {
    *error = *bad;
    return 0;
  }
  FrameHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (static_cast<FrameType>(h.type) != FrameType::abort) {
    *error = fmt::format("a frame of type {} where a notice belongs", h.type);
    return 0;
  }
  const std::size_t end = at + sizeof(FrameHeader) + h.length;
  return in.size() < end ? end - in.size() : 0;
}

// The calls a complete notice frame at `at` spares; false when undecodable.
bool decode_spared(const std::vector<std::byte>& in, std::size_t at, Spared* spared) {
  std::string message;
  std::string_view payload(reinterpret_cast<const char*>(in.data()) + at + sizeof(FrameHeader),
                           in.size() - at - sizeof(FrameHeader));
  return decode_notice(payload, message, *spared);
}

}  // namespace

void TcpTransport::lose_connection(int peer, const std::string& why) {
  CHORUS_CHECK(peer >= 0 && peer < options_.size && peer != options_.rank,
               "rank {} cannot lose a connection to peer {} (world size {})", options_.rank, peer,
               options_.size);
  std::lock_guard lock(mu_);
  Peer& p = peers_[peer];
  if (closing_ || p.gone || p.said_goodbye || !p.fd) return;
  // What the peer sent on this stream so far is taken in first (a notice,
  // a goodbye that explains the other channel's end).
  if (p.rx.awaiting_recv) set_aside_parked(peer);
  pump_rx(peer);
  if (p.gone || p.said_goodbye) return;
  log().warn("rank {}: {}; dropping the control connection to it too", options_.rank, why);
  // Its end of this stream ends as well, so a live peer settles with this
  // rank as for a connection the network dropped, whichever end asks first.
  ::shutdown(p.fd.get(), SHUT_RDWR);
  peer_lost(peer, why);
}

bool TcpTransport::start_probe(int peer, const std::string& why, const Spared& started) {
  Peer& p = peers_[peer];
  if (p.address.empty()) return false;
  bootstrap::HostPort hp;
  try {
    hp = bootstrap::parse_host_port(p.address);
  } catch (const Error&) {
    return false;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;  // no name lookup under mu_
  addrinfo* res = nullptr;
  if (getaddrinfo(hp.host.c_str(), std::to_string(hp.port).c_str(), &hints, &res) != 0)
    return false;
  Fd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int rc = fd ? ::connect(fd.get(), res->ai_addr, res->ai_addrlen) : -1;
  const int err = errno;
  freeaddrinfo(res);
  if (!fd || (rc != 0 && err != EINPROGRESS)) return false;  // refused at once: dead
  epoll_event ev{};
  ev.events = EPOLLOUT;
  ev.data.u64 = probe_id(peer);
  if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd.get(), &ev) != 0) return false;
  Probe probe;
  probe.fd = std::move(fd);
  probe.deadline = Clock::now() + kProbeTimeout;
  probe.why = why;
  probe.started = started;
  p.probe = std::move(probe);
  probes_.fetch_add(1, std::memory_order_release);
  return true;
}

void TcpTransport::end_probe(Peer& p) {
  if (!p.probe) return;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, p.probe->fd.get(), nullptr);
  p.probe.reset();
  probes_.fetch_sub(1, std::memory_order_release);
}

void TcpTransport::service_probe(int peer, uint32_t events) {
  Peer& p = peers_[peer];
  if (!p.probe) return;
  Probe& probe = *p.probe;
  std::string error;
  if (!probe.sent) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    int so_error = 0;
    socklen_t len = sizeof so_error;
    getsockopt(probe.fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error != 0) return settle_dead(peer, probe.why, probe.started);
    // Only the hello: nothing is vouched for (sealed) until the peer is
    // known alive, so a dying peer's queued connection seals nothing.
    const Hello hello =
        make_hello(options_.token, options_.rank, peer, options_.size, HelloPurpose::probe);
    // A fresh connection's buffer takes a few hundred bytes at once.
    ssize_t n = ::send(probe.fd.get(), &hello, sizeof hello, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n != static_cast<ssize_t>(sizeof hello)) return settle_dead(peer, probe.why, probe.started);
    probe.sent = true;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = probe_id(peer);
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, probe.fd.get(), &ev);
    return;
  }
  // The answer: a HelloAck, then the peer's notice frame.
  for (;;) {
    std::size_t missing = probe.in.size() < sizeof(HelloAck)
                              ? sizeof(HelloAck) - probe.in.size()
                              : notice_missing(probe.in, sizeof(HelloAck), &error);
    if (!error.empty()) break;
    if (missing == 0) {
      HelloAck ack;
      std::memcpy(&ack, probe.in.data(), sizeof ack);
      Spared theirs;
      if (ack.magic != kHelloMagic || ack.accepted_rank != options_.rank ||
          !decode_spared(probe.in, sizeof(HelloAck), &theirs)) {
        error = "an invalid answer";
        break;
      }
      // Alive: now this rank vouches, and tells the peer what.
      const auto mine = notice_frame(
          encode_notice(fmt::format("rank {} lost its connection to rank {}", options_.rank, peer),
                        vouch_to(peer), kMaxAbortReason));
      if (::send(probe.fd.get(), mine.data(), mine.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
          static_cast<ssize_t>(mine.size()))
        log().warn("rank {}: could not tell rank {} what it vouches for", options_.rank, peer);
      return settle_alive(peer, probe.why, theirs);
    }
    const std::size_t had = probe.in.size();
    if (!read_some(probe.fd.get(), probe.in, missing, &error)) break;
    if (probe.in.size() == had) return;  // more later
  }
  log().debug("rank {}: probe of rank {}: {}", options_.rank, peer, error);
  settle_dead(peer, probe.why, probe.started);
}

void TcpTransport::expire_probes() {
  if (probes_.load(std::memory_order_relaxed) == 0) return;
  const auto now = Clock::now();
  for (int peer = 0; peer < options_.size; ++peer) {
    Peer& p = peers_[peer];
    if (p.probe && p.probe->deadline <= now) settle_dead(peer, p.probe->why, p.probe->started);
  }
}

void TcpTransport::settle_dead(int peer, const std::string& why, const Spared& started) {
  Peer& p = peers_[peer];
  const Spared spares = started;  // the arguments may live in the probe
  const std::string message = lost_message(peer, why);
  end_probe(p);
  if (p.lost) return;
  log().error("{}", message);
  // A rank that dies cannot say which calls it finished, but its stream has
  // been read to the end: every frame it sent before dying is here. So its
  // death spares the calls this rank was in (or had finished last) when the
  // stream ended; what such a call still wants from it fails now, below and
  // in irecv, and that call's failure narrows what is spared here and at the
  // peers. A rank killed just after finishing a call thus leaves every peer
  // finishing it, instead of failing it at the peers that were still inside.
  p.lost = io_error(CHORUS_ERR_PEER_FAILURE, message);
  fail_and_notify_locked(CHORUS_ERR_PEER_FAILURE, message, "", spares);
  fail_requests_with_locked(p, p.lost);  // its unexpected frames stay for the spared calls
}

void TcpTransport::settle_alive(int peer, const std::string& reason, const Spared& spared) {
  Peer& p = peers_[peer];
  const std::string why = reason;  // the arguments may live in the probe
  const Spared theirs = spared;
  end_probe(p);
  if (p.lost) return;
  if (!p.gone) {  // its end saw the loss first: take what this end still holds
    if (p.rx.awaiting_recv) set_aside_parked(peer);
    pump_rx(peer);
    end_probe(p);  // the pump may have found the end and started one
    if (!p.gone) {
      p.gone = true;
      departed_.fetch_add(1, std::memory_order_release);
      epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, p.fd.get(), nullptr);
    }
  }
  const std::string message = fmt::format(
      "peer failure: the connection between rank {} and rank {} ended without a "
      "goodbye ({}), with both alive",
      options_.rank, peer, why);
  log().error("{}", message);
  p.lost = io_error(CHORUS_ERR_PEER_FAILURE, message);
  p.lost_alive = true;  // it can still be asked through its listener (tcp_recover.cpp)
  if (options_.isolate_peer_failures) {  // only what involves that peer fails
    fail_peer_locked(peer, p.lost);
    return;
  }
  const Spared mine = vouch_to(peer);
  fail_and_notify_locked(CHORUS_ERR_PEER_FAILURE, message, "",
                         board().spared().widened_by(mine.narrowed_by(theirs)));
  fail_requests_with_locked(p, p.lost);
}

const Spared& TcpTransport::vouch_to(int peer) {
  std::optional<Spared>& vouched = peers_[peer].vouched;
  // A transport that isolates peer failures goes on with the others:
  // nothing of theirs is sealed.
  if (!vouched) vouched = options_.isolate_peer_failures ? board().spared() : board().vouch();
  return *vouched;  // the same to that peer every time
}

std::string TcpTransport::lost_message(int peer, const std::string& why) const {
  return fmt::format(
      "peer failure: rank {} failed: its connection to rank {} ended without a goodbye ({})", peer,
      options_.rank, why);
}

bool TcpTransport::answer_probe(Stranger& s, std::string* refusal) {
  const int from = s.hello.from_rank;
  if (from == options_.rank) {
    *refusal = "a probe from this rank itself";
    return false;
  }
  // The prober knows this rank is alive once it reads this.
  const HelloAck ack{kHelloMagic, from};
  std::vector<std::byte> out(sizeof ack);
  std::memcpy(out.data(), &ack, sizeof ack);
  const auto notice = notice_frame(encode_notice(fmt::format("rank {} is alive", options_.rank),
                                                 vouch_to(from), kMaxAbortReason));
  out.insert(out.end(), notice.begin(), notice.end());
  if (::send(s.fd.get(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(out.size())) {
    *refusal = fmt::format("could not answer the probe of rank {}", from);
    return false;
  }
  return true;
}

bool TcpTransport::finish_probe(Stranger& s, std::string* refusal) {
  const int from = s.hello.from_rank;
  std::string error;
  for (;;) {
    std::size_t missing = notice_missing(s.notice, 0, &error);
    if (!error.empty()) break;
    if (missing == 0) {
      Spared theirs;
      if (!decode_spared(s.notice, 0, &theirs)) {
        error = "an undecodable notice";
        break;
      }
      // A rank closing its transport, or a peer that said goodbye, has no
      // call left to settle with the other.
      if (!closing_ && !peers_[from].said_goodbye)
        settle_alive(from, fmt::format("rank {} found it ended", from), theirs);
      return true;
    }
    const std::size_t had = s.notice.size();
    if (!read_some(s.fd.get(), s.notice, missing, &error)) break;
    if (s.notice.size() == had) return false;  // more later
  }
  // The prober went away before saying what it vouches for (it died, most
  // likely): its own stream tells this rank so.
  *refusal = fmt::format("a probe from rank {} ended with {}", from, error);
  return true;
}

}  // namespace chorus::tcp
