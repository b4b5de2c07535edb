// Recovering a small call's result from a survivor over the TCP control
// stream (collectives/verdict/recover.hpp): the asking side
// (recover_result) and the answering side (answer_ask_locked, run by the
// progress thread, so a peer busy in user code answers too).
//
// A rank that finished a call and then destroyed its communicator still
// answers: its close waits for every peer's goodbye (2 s when failed), and a
// rank asks before it says goodbye.
#include <sys/epoll.h>

#include <cstring>
#include <thread>

#include "base/core/log.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace chorus::tcp {
namespace {

// A live peer's progress thread answers within milliseconds, as a probe's.
constexpr auto kAskTimeout = std::chrono::seconds(2);

}  // namespace

int TcpTransport::recover_result(uint32_t tag, const CallSignature& sig, std::span<const int> peers,
                                 std::span<std::byte> result) {
  if (options_.isolate_peer_failures) return -1;
  int asked = 0;
  {
    std::lock_guard lock(mu_);
    if (closing_) return -1;
    for (Peer& p : peers_) p.asked.reset();
    for (int peer : peers) {
      if (peer < 0 || peer >= options_.size) continue;
      Peer& p = peers_[peer];
      // Dead, cut off, or its stream ended: it cannot be asked here.
      if (peer == options_.rank || !p.fd || p.lost || p.gone) continue;
      p.asked = Asked{tag, sig};
      SendOp op;
      op.header = make_frame(FrameType::ask, tag, 0, sig);
      enqueue_locked(peer, std::move(op));
      ++asked;
    }
  }
  if (asked == 0) return -1;
  const auto deadline = Clock::now() + kAskTimeout;
  auto backoff = std::chrono::microseconds(20);
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
          if (!p.asked->finished) continue;
          if (p.asked->result.size() != result.size()) {
            log().warn("rank {}: rank {} finished {} with a result of {} bytes, not {}",
                       options_.rank, peer, describe(sig), p.asked->result.size(), result.size());
            continue;
          }
          if (!result.empty()) std::memcpy(result.data(), p.asked->result.data(), result.size());
          p.asked.reset();
          return peer;
        }
        if (p.lost || p.gone) continue;  // it will not answer
        // An answer behind a large frame parked in the socket would never
        // come: the frame is read aside (its call failed here).
        if (p.rx.awaiting_recv) {
          set_aside_parked(peer);
          pump_rx(peer);
        }
        waiting = true;
      }
      if (!waiting) return -1;
      if (Clock::now() >= deadline) {
        log().warn("rank {}: not every live peer said within {} s whether it finished {}",
                   options_.rank, kAskTimeout.count(), describe(sig));
        return -1;
      }
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::microseconds(2000));
  }
}

void TcpTransport::answer_ask_locked(int peer, uint32_t tag, const CallSignature& sig) {
  Peer& p = peers_[peer];
  if (p.gone || !p.fd) return;
  SendOp op;
  bool finished = false;
  if (!options_.isolate_peer_failures) {
    CallBoard::Slot& slot = board().slot(tag);
    // Sealed first: from now on no later call's part is done here, so a
    // "not finished" stays true for every rank that asks, whenever it asks.
    finished = slot.vouch() >= sig.seq && slot.kept(sig.seq, op.owned);
  }
  if (!finished) op.owned.clear();
  log().info("rank {}: rank {} asks whether this rank finished {}: {}", options_.rank, peer,
             describe(sig), finished ? "yes, the result goes to it" : "no (sealed)");
  op.header = make_frame(FrameType::answer, tag, op.owned.size(), sig);
  op.header.flags = finished ? kAnswerFinished : 0;
  enqueue_locked(peer, std::move(op));
}

void TcpTransport::take_answer_locked(int peer) {
  Peer& p = peers_[peer];
  RxState& rx = p.rx;
  if (!p.asked || p.asked->answered || !(p.asked->sig == rx.header.sig) ||
      CallBoard::space_of(p.asked->tag) != CallBoard::space_of(rx.header.tag)) {
    log().debug("rank {}: an answer from rank {} to nothing asked", options_.rank, peer);
    return;
  }
  p.asked->answered = true;
  p.asked->finished = (rx.header.flags & kAnswerFinished) != 0;
  p.asked->result = std::move(rx.holding);
  rx.holding.clear();
}

}  // namespace chorus::tcp
