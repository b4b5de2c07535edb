// Recovering a small call's result from a survivor over the TCP control
// stream (collectives/verdict/recover.hpp): the asking side
// (recover_result) and the answering side (answer_ask_locked, run by the
// progress thread, so a peer busy in user code answers too).
//
// A rank that finished a call and then destroyed its communicator still
// answers: its close waits for every peer's goodbye (2 s when failed), and a
// rank asks before it says goodbye.
//
// A peer whose stream the network dropped while both lived (settled alive
// by the probe, tcp_probe.cpp) is asked through its listener instead, as
// the probe reached it: a Hello with purpose ask and the ASK frame; it
// answers on that connection with a HelloAck and the ANSWER frame. Without
// that, a live rank cut off from every peer could not ask, and failed a
// call its peers finished.
#include <sys/epoll.h>

#include <cstring>
#include <thread>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace chorus::tcp {
namespace {

// A live peer's progress thread answers within milliseconds, as a probe's.
constexpr auto kAskTimeout = std::chrono::seconds(2);

}  // namespace

int TcpTransport::send_asks_locked(uint32_t tag, const CallSignature& sig,
                                   std::span<const int> peers, uint8_t flags,
                                   chorus_result_t code) {
  for (Peer& p : peers_) p.asked.reset();
  int asked = 0;
  for (int peer : peers) {
    if (peer < 0 || peer >= options_.size || peer == options_.rank) continue;
    Peer& p = peers_[peer];
    // Dead, cut off, or its stream ended: it cannot be asked here.
    if (!p.fd || p.lost || p.gone) continue;
    p.asked.emplace();
    p.asked->tag = tag;
    p.asked->sig = sig;
    SendOp op;
    op.header = make_frame(FrameType::ask, tag, 0, sig);
    op.header.flags = flags;
    op.header.reserved = static_cast<uint32_t>(code);
    enqueue_locked(peer, std::move(op));
    ++asked;
  }
  return asked;
}

template <typename OnAnswer>
TcpTransport::Asking TcpTransport::collect_answers(const CallSignature& sig,
                                                   Clock::time_point deadline,
                                                   OnAnswer&& on_answer) {
  auto backoff = std::chrono::microseconds(20);
  bool incomplete = false;
  while (true) {
    {
      std::lock_guard lock(mu_);
      // The I/O is done here too: the progress thread stands aside while a
      // waiter spins (a caller waiting on a non-blocking call's request may),
      // and then nothing else would read the answers.
      epoll_event events[64];
      const int count = epoll_wait(epoll_fd_.get(), events, 64, 0);
      if (count > 0) process_events(events, count);
      expire_probes();
      bool waiting = false;
      for (int peer = 0; peer < options_.size; ++peer) {
        Peer& p = peers_[peer];
        if (!p.asked) continue;
        if (p.asked->answered) {
          Asked answer = std::move(*p.asked);
          p.asked.reset();  // filed once
          if (on_answer(peer, answer)) {
            for (Peer& q : peers_) q.asked.reset();  // later answers are to nothing asked
            return Asking::stopped;
          }
          continue;
        }
        if (p.lost || p.gone) {  // it will not answer
          p.asked.reset();
          incomplete = true;
          continue;
        }
        // An answer behind a large frame parked in the socket would never
        // come: the frame is read aside (its call failed here).
        if (p.rx.awaiting_recv) {
          set_aside_parked(peer);
          pump_rx(peer);
        }
        waiting = true;
      }
      if (!waiting) return incomplete ? Asking::incomplete : Asking::answered;
      if (Clock::now() >= deadline) {
        log().warn("rank {}: not every peer asked said within {} s where it is in {}",
                   options_.rank, kAskTimeout.count(), describe(sig));
        for (Peer& q : peers_) q.asked.reset();
        return Asking::incomplete;
      }
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::microseconds(2000));
  }
}

int TcpTransport::recover_result(uint32_t tag, const CallSignature& sig, std::span<const int> peers,
                                 std::span<std::byte> result, chorus_result_t code) {
  if (options_.isolate_peer_failures) return -1;
  const auto take = [&](int peer, const std::vector<std::byte>& kept) {
    if (kept.size() == result.size()) {
      if (!result.empty()) std::memcpy(result.data(), kept.data(), result.size());
      return true;
    }
    log().warn("rank {}: rank {} finished {} with a result of {} bytes, not {}", options_.rank,
               peer, describe(sig), kept.size(), result.size());
    return false;
  };
  int asked = 0;
  std::vector<std::pair<int, std::string>> by_listener;  // peer, its listener
  {
    std::lock_guard lock(mu_);
    if (closing_) return -1;
    for (int peer : peers) {
      if (peer < 0 || peer >= options_.size || peer == options_.rank) continue;
      const Peer& p = peers_[peer];
      // A peer that left after it finished the call handed its result over.
      for (const auto& r : p.finished_results)
        if (r.space == CallBoard::space_of(tag) && r.sig == sig && take(peer, r.bytes)) {
          log().info("rank {}: rank {} had finished {} and handed its result over", options_.rank,
                     peer, describe(sig));
          return peer;
        }
      if (p.lost_alive && !p.said_goodbye && !p.address.empty())
        by_listener.emplace_back(peer, p.address);
    }
    asked = send_asks_locked(tag, sig, peers, 0, code);
  }
  const auto deadline = Clock::now() + kAskTimeout;
  for (const auto& [peer, address] : by_listener) {
    std::vector<std::byte> kept;
    if (!ask_through_listener(peer, address, tag, sig, code, Deadline::at(deadline), &kept) ||
        !take(peer, kept))
      continue;
    std::lock_guard lock(mu_);
    for (Peer& p : peers_) p.asked.reset();  // later answers are to nothing asked
    return peer;
  }
  if (asked == 0) return -1;
  int from = -1;
  collect_answers(sig, deadline, [&](int peer, const Asked& answer) {
    if (!answer.finished || !take(peer, answer.result)) return false;
    from = peer;
    return true;
  });
  return from;
}

bool TcpTransport::parts_done(uint32_t tag, const CallSignature& sig, std::span<const int> peers,
                              chorus_result_t code) {
  if (options_.isolate_peer_failures) return false;
  {
    std::lock_guard lock(mu_);
    if (closing_) return false;
    std::vector<int> to_ask;
    for (int peer : peers) {
      if (peer < 0 || peer >= options_.size || peer == options_.rank) return false;
      const Peer& p = peers_[peer];
      if (p.fd && !p.lost && !p.gone) {
        to_ask.push_back(peer);
        continue;
      }
      // It cannot be asked (it left, its stream ended): its last report
      // (the answer to this wait's announcement) may say it finished.
      const auto report = board().report(peer, tag);
      if (!report ||
          (report->progress.finished.seq < sig.seq && report->progress.current.seq <= sig.seq))
        return false;
    }
    if (to_ask.empty()) return true;
    if (send_asks_locked(tag, sig, to_ask, kAskPartDone, code) == 0) return false;
  }
  bool every_part_done = true;
  const Asking asking =
      collect_answers(sig, Clock::now() + kAskTimeout, [&](int, const Asked& answer) {
        if (answer.part_done) return false;
        every_part_done = false;
        return true;  // one is enough: that peer is sealed, and the call fails
      });
  return asking == Asking::answered && every_part_done;
}

void TcpTransport::answer_ask_locked(int peer, const FrameHeader& ask) {
  Peer& p = peers_[peer];
  if (p.gone || !p.fd) return;
  enqueue_locked(peer, answer_locked(peer, ask));
}

TcpTransport::SendOp TcpTransport::answer_locked(int peer, const FrameHeader& ask) {
  SendOp op;
  const CallSignature& sig = ask.sig;
  // The asker's verdict: a sealed call here fails with the same code.
  const auto code = static_cast<chorus_result_t>(ask.reserved);
  const bool known_code = code > CHORUS_SUCCESS && code <= CHORUS_ERR_NO_MEMORY;
  const chorus_result_t seal_code = known_code ? code : CHORUS_ERR_PEER_FAILURE;
  if (ask.flags & kAskPartDone) {
    const bool done =
        !options_.isolate_peer_failures && board().slot(ask.tag).done_or_seal(sig.seq, seal_code);
    log().info(
        "rank {}: rank {}'s deadline passed in {} while it waited on this rank; this rank's "
        "part {}",
        options_.rank, peer, describe(sig), done ? "is done" : "is not (sealed)");
    op.header = make_frame(FrameType::answer, ask.tag, 0, sig);
    op.header.flags = done ? kAnswerPartDone : 0;
    return op;
  }
  bool finished = false;
  if (!options_.isolate_peer_failures) {
    CallBoard::Slot& slot = board().slot(ask.tag);
    // Sealed first: from now on no later call's part is done here, so a
    // "not finished" stays true for every rank that asks, whenever it asks.
    finished = slot.vouch(seal_code) >= sig.seq && slot.kept(sig.seq, op.owned);
  }
  if (!finished) op.owned.clear();
  log().info("rank {}: rank {} asks whether this rank finished {}: {}", options_.rank, peer,
             describe(sig), finished ? "yes, the result goes to it" : "no (sealed)");
  op.header = make_frame(FrameType::answer, ask.tag, op.owned.size(), sig);
  op.header.flags = finished ? kAnswerFinished : 0;
  return op;
}

bool TcpTransport::finish_ask(Stranger& s, std::string* refusal) {
  const int from = s.hello.from_rank;
  std::string error;
  if (s.notice.size() < sizeof(FrameHeader) &&
      !read_some(s.fd.get(), s.notice, sizeof(FrameHeader) - s.notice.size(), &error)) {
    *refusal = fmt::format("an ask from rank {} ended with {}", from, error);
    return true;
  }
  if (s.notice.size() < sizeof(FrameHeader)) return false;  // more later
  const std::span<const std::byte> bytes(s.notice.data(), sizeof(FrameHeader));
  if (auto bad = validate_frame(bytes)) {
    *refusal = fmt::format("an ask from rank {}: {}", from, *bad);
    return true;
  }
  FrameHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (static_cast<FrameType>(h.type) != FrameType::ask || h.length != 0) {
    *refusal = fmt::format("a frame of type {} where an ask belongs", h.type);
    return true;
  }
  const SendOp op = answer_locked(from, h);
  const HelloAck ack{kHelloMagic, from};
  std::vector<std::byte> out(sizeof ack + sizeof op.header + op.owned.size());
  std::memcpy(out.data(), &ack, sizeof ack);
  std::memcpy(out.data() + sizeof ack, &op.header, sizeof op.header);
  if (!op.owned.empty())
    std::memcpy(out.data() + sizeof ack + sizeof op.header, op.owned.data(), op.owned.size());
  // Written here, by the thread that serves every socket: a kept result is
  // CHORUS_KEEP_RESULT at most, and the asker reads it as it comes.
  try {
    write_all(s.fd.get(), out, Deadline::after(kAskTimeout));
  } catch (const IoError& e) {
    *refusal = fmt::format("could not answer the ask of rank {}: {}", from, e.what());
  }
  return true;
}

bool TcpTransport::ask_through_listener(int peer, const std::string& address, uint32_t tag,
                                        const CallSignature& sig, chorus_result_t code,
                                        const Deadline& deadline, std::vector<std::byte>* result) {
  try {
    Fd fd = bootstrap::connect_once(address, deadline);
    // The hello and the ask in one write: the peer reads both at once.
    struct {
      Hello hello;
      FrameHeader ask;
    } question{make_hello(options_.token, options_.rank, peer, options_.size, HelloPurpose::ask),
               make_frame(FrameType::ask, tag, 0, sig)};
    question.ask.reserved = static_cast<uint32_t>(code);
    static_assert(sizeof question == sizeof(Hello) + sizeof(FrameHeader));
    write_all(fd.get(), bytes_of(question), deadline);
    HelloAck ack{};
    read_exact(fd.get(), writable_bytes_of(ack), deadline);
    if (ack.magic != kHelloMagic || ack.accepted_rank != options_.rank)
      throw IoError(CHORUS_ERR_IO, "an invalid HelloAck");
    FrameHeader h;
    read_exact(fd.get(), writable_bytes_of(h), deadline);
    if (auto bad = validate_frame(bytes_of(h))) throw IoError(CHORUS_ERR_IO, *bad);
    if (static_cast<FrameType>(h.type) != FrameType::answer || !(h.sig == sig) ||
        CallBoard::space_of(h.tag) != CallBoard::space_of(tag) || h.length > kMaxAnswerLength)
      throw IoError(CHORUS_ERR_IO,
                    fmt::format("a frame of type {} that answers nothing asked", h.type));
    result->resize(h.length);
    read_exact(fd.get(), *result, deadline);
    const bool finished = (h.flags & kAnswerFinished) != 0;
    log().info("rank {}: asked through its listener, rank {} says it {} {}", options_.rank, peer,
               finished ? "finished" : "did not finish", describe(sig));
    return finished;
  } catch (const Error& e) {
    log().warn("rank {}: could not ask rank {} through its listener about {}: {}", options_.rank,
               peer, describe(sig), e.what());
    return false;
  }
}

void TcpTransport::take_answer_locked(int peer) {
  Peer& p = peers_[peer];
  RxState& rx = p.rx;
  if (!p.asked || p.asked->answered || !(p.asked->sig == rx.header.sig) ||
      CallBoard::space_of(p.asked->tag) != CallBoard::space_of(rx.header.tag)) {
    // Still true: that peer finished that call, with that result. A few
    // are kept, for a failure of this rank's that comes later.
    constexpr std::size_t kFinishedResults = 8;
    if (rx.header.flags & kAnswerFinished) {
      p.finished_results.push_back(
          {CallBoard::space_of(rx.header.tag), rx.header.sig, std::move(rx.holding)});
      if (p.finished_results.size() > kFinishedResults) p.finished_results.pop_front();
    }
    rx.holding.clear();
    log().debug("rank {}: rank {} says, unasked, that it finished {}", options_.rank, peer,
                describe(rx.header.sig));
    return;
  }
  p.asked->answered = true;
  p.asked->finished = (rx.header.flags & kAnswerFinished) != 0;
  p.asked->part_done = (rx.header.flags & kAnswerPartDone) != 0;
  p.asked->result = std::move(rx.holding);
  rx.holding.clear();
}

}  // namespace chorus::tcp
