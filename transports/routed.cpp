#include "transports/routed.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "base/core/error.hpp"

namespace chorus {

RoutedTransport::RoutedTransport(std::vector<std::unique_ptr<Transport>> transports,
                                 std::vector<int> route)
    : transports_(std::move(transports)), route_(std::move(route)) {
  CHORUS_CHECK(!transports_.empty() && static_cast<int>(route_.size()) == control().size(),
               "{} transports, {} routes for {} ranks", transports_.size(), route_.size(),
               transports_.empty() ? 0 : control().size());
  for (int r : route_)
    CHORUS_CHECK(r >= 0 && r < static_cast<int>(transports_.size()), "route to transport {} of {}",
                 r, transports_.size());
  for (const auto& t : transports_) {
    if (!name_.empty()) name_ += '+';
    name_ += t->name();
    t->share_board(board_handle());  // the control channel answers from what the caller marks
  }
}

RoutedTransport::~RoutedTransport() {
  // Data transports go first: the control channel reports their peers' fate.
  for (std::size_t i = transports_.size(); i-- > 1;) transports_[i].reset();
}

Transport& RoutedTransport::route(int peer) const {
  CHORUS_CHECK(peer >= 0 && peer < static_cast<int>(route_.size()), "peer {} of {}", peer,
               route_.size());
  return *transports_[static_cast<std::size_t>(route_[static_cast<std::size_t>(peer)])];
}

bool RoutedTransport::can_connect(int peer) const {
  return route(peer).can_connect(peer);
}

RequestPtr RoutedTransport::isend(int peer, uint32_t tag, const CallSignature& sig,
                                  std::span<const std::byte> data) {
  return route(peer).isend(peer, tag, sig, data);
}

RequestPtr RoutedTransport::irecv(int peer, uint32_t tag, const CallSignature& sig,
                                  std::span<std::byte> data) {
  return route(peer).irecv(peer, tag, sig, data);
}

bool RoutedTransport::poll() {
  bool moved = false;
  for (auto& t : transports_) moved |= t->poll();
  return moved;
}

void RoutedTransport::spin_begin() {
  for (auto& t : transports_) t->spin_begin();
}

void RoutedTransport::spin_end() {
  for (auto& t : transports_) t->spin_end();
}

void RoutedTransport::wait_for_progress(Request& pending, std::chrono::nanoseconds timeout) {
  Transport& data = route(pending.peer());
  data.wait_for_progress(pending, timeout);
  // The control channel's progress thread stands aside while this thread
  // waits: read what came on it (notices, announcements) here.
  if (&data != &control()) control().poll();
  // A data transport may not notice a dead peer (UCX): the control channel does.
  if (pending.done()) return;
  try {
    check_peer(pending.peer(), pending.tag(), pending.signature());
  } catch (const IoError&) {
    // Another thread (the progress thread) may have read the peer's last
    // message and then its goodbye since the look above: the request is
    // done then, and the goodbye only ends a wait for what never came.
    if (!pending.done()) throw;
  }
  if (&data != &control()) check_lost_arrival(data, pending);
}

std::optional<Clock::time_point> RoutedTransport::arrivals_may_be_lost_since() const {
  std::optional<Clock::time_point> since;
  for (std::size_t i = 1; i < transports_.size(); ++i)
    if (auto t = transports_[i]->arrivals_may_be_lost_since(); t && (!since || *t < *since))
      since = t;
  return since;
}

// A peer that died in the middle of a shared-memory send over UCX can leave
// this rank's receive queue stopped: what a live peer sends after it never
// arrives, and a call its death spares (it was in progress) would wait for
// it until the deadline, though that peer may be done with the call. The
// control channel still carries the truth: the peer is asked, and sealed if
// its part is not done (it fails the call too); if its part is done, what
// it sent should be here, and a wait that still lacks it fails the call.
// Either way every rank reaches one verdict (the round, a kept result, the
// root's confirmation), and soon.
void RoutedTransport::check_lost_arrival(const Transport& data, const Request& pending) {
  const auto since = data.arrivals_may_be_lost_since();
  if (!since) return;
  const auto now = Clock::now();
  if (now - *since < kLostArrivalAsk) return;
  const uint32_t tag = pending.tag();
  const CallSignature& sig = pending.signature();
  const int peer = pending.peer();
  {
    std::lock_guard lock(asked_mu_);
    auto asked = std::find_if(asked_.begin(), asked_.end(), [&](const AskedPeer& a) {
      return a.peer == peer && a.tag == tag && a.seq == sig.seq;
    });
    if (asked != asked_.end()) {
      if (now - asked->answered < kLostArrivalWait) return;
      asked_.erase(asked);
      throw IoError(CHORUS_ERR_PEER_FAILURE,
                    fmt::format("peer failure: rank {}: {}: rank {} did its part, but what it sent "
                                "did not arrive within {} ms after a peer failed (a rank that "
                                "dies in the middle of a shared-memory send can stop UCX's "
                                "receive queue)",
                                rank(), describe(sig), peer, kLostArrivalWait.count()));
    }
  }
  const int peers[] = {peer};
  if (!control().parts_done(tag, sig, peers, CHORUS_ERR_PEER_FAILURE))
    throw IoError(CHORUS_ERR_PEER_FAILURE,
                  fmt::format("peer failure: rank {}: {}: nothing came from rank {} after a peer "
                              "failed, and its part was not done (a rank that dies in the middle "
                              "of a shared-memory send can stop UCX's receive queue)",
                              rank(), describe(sig), peer));
  std::lock_guard lock(asked_mu_);
  // Entries of calls long over: a peer is asked once per call.
  std::erase_if(asked_,
                [&](const AskedPeer& a) { return now - a.answered > 4 * kLostArrivalWait; });
  asked_.push_back({peer, tag, sig.seq, Clock::now()});
}

void RoutedTransport::pass_on_control_failure() {
  // A data transport's failed connection is the control channel's to settle
  // (Transport::take_lost_connections); its verdict comes back below.
  for (std::size_t i = 1; i < transports_.size(); ++i)
    for (const auto& [peer, why] : transports_[i]->take_lost_connections())
      control().lose_connection(peer, why);
  try {
    control().check_failed();
  } catch (const Error& e) {
    const Spared spared = control().spared();
    for (std::size_t i = 1; i < transports_.size(); ++i)
      transports_[i]->fail(e.code(), e.what(), spared);
  }
}

void RoutedTransport::check_failed() {
  pass_on_control_failure();
  for (auto& t : transports_) t->check_failed();
}

void RoutedTransport::check_call(uint32_t tag, const CallSignature& sig) {
  pass_on_control_failure();
  for (auto& t : transports_) t->check_call(tag, sig);
}

void RoutedTransport::check_peer(int peer, uint32_t tag, const CallSignature& sig) {
  check_call(tag, sig);
  control().check_peer(peer, tag, sig);  // every peer says goodbye on the control channel
  // ...but last: a leaving rank closes its data transports first, and UCX's
  // close waits up to CHORUS_TIMEOUT for the peers' goodbyes. Its goodbye on
  // the data transport comes at once; a send to it that UCX's rendezvous
  // never matches would otherwise wait for the control channel's.
  Transport& data = route(peer);
  if (&data != &control()) data.check_peer(peer, tag, sig);
}

void RoutedTransport::close() {
  for (std::size_t i = transports_.size(); i-- > 0;) transports_[i]->close();
}

void RoutedTransport::fail(chorus_result_t code, const std::string& message, const Spared& spared) {
  for (auto& t : transports_) t->fail(code, message, spared);
}

}  // namespace chorus
