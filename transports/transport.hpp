// The transport interface: moves byte ranges between two ranks. Transports
// know nothing of collectives; the CallSignature they carry is opaque to them
// except that a receive compares it with the sender's (and fails with
// CHORUS_ERR_MISMATCH, naming both ranks and both calls, when they differ).
//
// Matching: messages from one peer with one tag are matched to receives posted
// for that (peer, tag) in the order both sides issued them. The received
// message must have exactly the size of the receive buffer.
//
// Failure: when a peer dies (connection lost without a goodbye) or aborts,
// the transport fails every pending and later request with an IoError
// (CHORUS_ERR_PEER_FAILURE / CHORUS_ERR_ABORTED) that names the peer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/core/completion.hpp"
#include "base/core/contract.hpp"
#include "base/core/deadline.hpp"
#include "include/chorus.h"
#include "transports/call_board.hpp"

namespace chorus {

class Request {
 public:
  Request(int peer, bool is_send, uint32_t tag, const CallSignature& sig, std::size_t bytes)
      : peer_(peer), is_send_(is_send), tag_(tag), sig_(sig), bytes_(bytes) {}
  virtual ~Request() = default;

  int peer() const { return peer_; }
  bool is_send() const { return is_send_; }
  uint32_t tag() const { return tag_; }
  const CallSignature& signature() const { return sig_; }
  std::size_t bytes() const { return bytes_; }
  Completion& completion() { return completion_; }
  bool done() const { return completion_.done(); }

 private:
  int peer_;
  bool is_send_;
  uint32_t tag_;
  CallSignature sig_;
  std::size_t bytes_;
  Completion completion_;
};
using RequestPtr = std::shared_ptr<Request>;

// Tags with this bit carry point-to-point messages (lib/comm/link.hpp:
// p2p_tag). Their sequence numbers count per peer and tag, not per
// communicator: only a collective's call is known by its tag space
// (tag >> Spared::kSpaceShift) and number, whatever team's tag it waits on.
inline constexpr uint32_t kPointToPointTag = 1u << 31;
inline bool is_collective_tag(uint32_t tag) {
  return (tag & kPointToPointTag) == 0;
}

// The calls a failure leaves running. A rank that fails (or aborts) tells its
// peers, per tag space (a communicator's collectives: lib/comm/link.hpp), the
// last call it had finished; a peer still inside one of those calls finishes
// it, since the failing rank took its whole part in it. Every other request
// fails. Point-to-point messages are never spared.
struct Spared {
  struct Entry {
    uint32_t space = 0;     // tag >> kSpaceShift of the calls' tags
    uint64_t finished = 0;  // calls with sequence numbers up to this one
    bool operator==(const Entry&) const = default;
  };
  static constexpr int kSpaceShift = 20;
  std::vector<Entry> entries;
  bool operator==(const Spared&) const = default;

  bool covers(uint32_t tag, const CallSignature& sig) const {
    for (const Entry& e : entries)
      if (e.space == tag >> kSpaceShift) return sig.seq != 0 && sig.seq <= e.finished;
    return false;
  }
  // What both spare: a call one of them fails, fails (another rank failed a
  // spared call after all, or saw a failure first that spares less).
  Spared narrowed_by(const Spared& other) const {
    Spared out;
    for (const Entry& e : entries)
      for (const Entry& o : other.entries)
        if (o.space == e.space) out.entries.push_back({e.space, std::min(e.finished, o.finished)});
    return out;
  }
  // What either spares (two live ranks whose connection the network
  // dropped: what one finished, and what the other's part is done for;
  // tcp_probe.cpp).
  Spared widened_by(const Spared& other) const {
    Spared out = *this;
    for (const Entry& o : other.entries) {
      auto same = std::find_if(out.entries.begin(), out.entries.end(),
                               [&](const Entry& e) { return e.space == o.space; });
      if (same == out.entries.end())
        out.entries.push_back(o);
      else
        same->finished = std::max(same->finished, o.finished);
    }
    return out;
  }
};

// A transport's failure: the first one's error, and its code and message as
// the notices carry them, and the calls it still spares.
struct FailureRecord {
  std::exception_ptr error;  // once set, every request fails with it...
  Spared spared;             // ...but those of the calls it spares
  chorus_result_t code = CHORUS_SUCCESS;
  std::string text;

  explicit operator bool() const { return error != nullptr; }
  // Whether it refuses a request of this call.
  bool refuses(uint32_t tag, const CallSignature& sig) const {
    return error && !spared.covers(tag, sig);
  }
  // Takes in a failure: the first is kept (its error says `local_message`
  // if not empty); a later one that spares less narrows what is spared (a
  // spared call failed here after all, or a notice that spares less), and
  // the first failure stays what is reported. Returns whether anything
  // changed: then the transport fails what is no longer spared and tells
  // its peers again. The spared calls only shrink, so the notices end.
  bool take(chorus_result_t code, const std::string& message, const std::string& local_message,
            const Spared& spared);
};

// A failure notice on the wire: the spared calls, then the message, in at
// most max_bytes (the message is cut to fit). decode_notice returns false for
// a payload that is not one.
std::string encode_notice(const std::string& message, const Spared& spared, std::size_t max_bytes);
bool decode_notice(std::string_view payload, std::string& message, Spared& spared);

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual bool can_connect(int peer) const = 0;
  // Whether two threads of this rank may issue and wait on requests at once
  // (the pipelined stages of the hierarchical algorithms do). Every real
  // transport guards its state with a lock of its own; chorus-sim's, whose
  // rank has one virtual clock, does not.
  virtual bool allows_concurrent_waits() const { return true; }

  // Never block; the request completes later (or at once). Send buffers must
  // stay unchanged and receive buffers untouched by the caller until done.
  virtual RequestPtr isend(int peer, uint32_t tag, const CallSignature& sig,
                           std::span<const std::byte> data) = 0;
  virtual RequestPtr irecv(int peer, uint32_t tag, const CallSignature& sig,
                           std::span<std::byte> data) = 0;
  // A gather send: one message whose payload is `pieces` back to back, each
  // read where it lies (every piece's memory as isend's; the list itself is
  // copied). Only where gathers_sends(peer): a caller of a transport that
  // does not packs the pieces and calls isend. The receiver cannot tell the
  // two apart.
  virtual bool gathers_sends(int peer) const {
    (void)peer;
    return false;
  }
  virtual RequestPtr isend_gather(int peer, uint32_t tag, const CallSignature& sig,
                                  std::span<const std::span<const std::byte>> pieces);
  // A scatter receive: one message whose payload fills `pieces` in order
  // (every piece's memory as irecv's; the list itself is copied); its length
  // must be theirs together. Only where scatters_recvs(peer): a caller of a
  // transport that does not receives into one buffer and copies. The sender
  // cannot tell it from an irecv.
  virtual bool scatters_recvs(int peer) const {
    (void)peer;
    return false;
  }
  virtual RequestPtr irecv_scatter(int peer, uint32_t tag, const CallSignature& sig,
                                   std::span<const std::span<std::byte>> pieces);

  // Makes whatever progress is possible without blocking; true if anything
  // moved. Transports with their own progress thread may return false.
  virtual bool poll() { return false; }
  // A waiter starts / stops calling poll() in a spin loop. While one spins,
  // a transport's progress thread may stand aside, so that the two never
  // fight for the transport (with more threads than cores, the loser of that
  // fight can hold the lock while preempted).
  virtual void spin_begin() {}
  virtual void spin_end() {}
  // Between spin_begin and spin_end: sleeps until something may have moved
  // for `pending` (or `timeout` passes). The default sleeps on its completion
  // flag; a transport whose waiters can take the I/O themselves (TCP: the
  // waiter sleeps in epoll) saves the hand-off through its progress thread.
  virtual void wait_for_progress(Request& pending, std::chrono::nanoseconds timeout) {
    pending.completion().wait(Deadline::after(timeout), 0);
  }

  // Throws the error that failed this transport (a peer died or some rank
  // aborted), if any. Cheap: waits outside the transport (shared memory) call
  // it every few milliseconds to learn of a dead peer.
  virtual void check_failed() {}
  // Reads at once what the peers have sent so far and handles their asks
  // and notices, as the progress thread would on its next turn. A rank that
  // has not run for a while (stopped, or starved of its core) may hold an
  // ask whose asker gave up waiting for the answer: mark_part_done takes it
  // in before it marks the part done, so that the two agree.
  virtual void drain_input() {}
  // As check_failed, for the call with this tag and signature: no error if
  // the failure spares it (Spared).
  virtual void check_call(uint32_t tag, const CallSignature& sig) {
    (void)tag, (void)sig;
    check_failed();
  }
  // check_call, and throws CHORUS_ERR_PEER_FAILURE if `peer` has left
  // (destroyed its last communicator: it will never send again). Waits that
  // need a peer's part outside the transport (shared memory) ask this, since
  // a peer leaving is not a failure of the transport: split communicators
  // without that peer go on.
  virtual void check_peer(int peer, uint32_t tag, const CallSignature& sig) {
    (void)peer;
    check_call(tag, sig);
  }
  // A rank whose wait is long tells the peers it waits on which call it is
  // in; a peer that waits in another call with the same sequence number and
  // tag space fails with CHORUS_ERR_MISMATCH instead of both waiting out the
  // deadline (ranks that wait on each other in a cycle exchange no data that
  // could show the mismatch). check_announced throws that mismatch if a peer
  // announced such a call. Only long waits call it, so a transport that
  // holds incoming data back (TCP's parked frames) also lets it through
  // there: what is queued behind it (a peer's abort) is what the wait needs.
  static constexpr std::chrono::milliseconds kAnnounceAfter{100};  // and then how often
  virtual void announce(int peer, uint32_t tag, const CallSignature& sig) {
    (void)peer, (void)tag, (void)sig;
  }
  virtual void check_announced(uint32_t tag, const CallSignature& sig) { (void)tag, (void)sig; }
  // Whether peers answer announcements with where they are (TCP: status
  // frames), so that the board gets their reports.
  virtual bool reports_progress() const { return false; }
  // The calls the first failure spares (empty when none, or not failed).
  virtual Spared spared() const { return {}; }

  // After this rank failed call `sig` (in tag's space) with `code` (a peer
  // failure, or its deadline): asks every one of `peers` (the call's other
  // ranks) still alive whether it finished the call, sealing the call where
  // it did not (with `code`: CallBoard::Slot::seal_code), and copies the
  // kept result of one that did into `result`
  // (collectives/verdict/recover.hpp). Returns that peer's rank, or -1 when
  // no live peer finished it, or this transport cannot ask.
  virtual int recover_result(uint32_t tag, const CallSignature& sig, std::span<const int> peers,
                             std::span<std::byte> result,
                             chorus_result_t code = CHORUS_ERR_PEER_FAILURE) {
    (void)tag, (void)sig, (void)peers, (void)result, (void)code;
    return -1;
  }
  // After this rank's deadline passed in call `sig` while it waited on
  // `peers` (CollectiveContext::extend_deadline), or its data transport
  // may have lost what they sent (RoutedTransport::wait_for_progress): asks
  // each whether its part of the call is done (what it sends is on its
  // way), sealing it where not (CallBoard::Slot::done_or_seal, with `code`).
  // True when every one answered that it is; false when one is not, one
  // cannot be asked or does not answer, or this transport cannot ask.
  virtual bool parts_done(uint32_t tag, const CallSignature& sig, std::span<const int> peers,
                          chorus_result_t code = CHORUS_ERR_TIMEOUT) {
    (void)tag, (void)sig, (void)peers, (void)code;
    return false;
  }
  // Since when a message a live peer sent may never arrive here (a peer
  // killed in the middle of a shared-memory send can stop this rank's UCX
  // receive queue for every sender), or nullopt. Waits on such a transport
  // ask the peers they wait on (RoutedTransport::wait_for_progress).
  virtual std::optional<Clock::time_point> arrivals_may_be_lost_since() const {
    return std::nullopt;
  }

  // A data transport under a control channel (RoutedTransport) does not
  // settle alone that a peer whose connection failed is dead: the peer may
  // be alive, cut off by the network, and would take this rank for dead in
  // turn. It hands such peers here (each once, with why), and the control
  // channel settles them (lose_connection).
  virtual std::vector<std::pair<int, std::string>> take_lost_connections() { return {}; }
  // The control channel's side: another channel to `peer` failed. It ends
  // its own connection to the peer too and settles as for a connection of
  // its own that ended: dead, or alive with both failing what they cannot
  // both finish (TCP: tcp_probe.cpp).
  virtual void lose_connection(int peer, const std::string& why) { (void)peer, (void)why; }

  // Where this rank and its peers are in their calls (CallBoard): the
  // communicator marks its calls here; a transport that carries
  // announcements answers each with this rank's progress and files the
  // peers' answers, which a timed-out wait reports.
  CallBoard& board() const { return *board_; }
  // Transports that route over others give them their board.
  void share_board(std::shared_ptr<CallBoard> board) { board_ = std::move(board); }
  std::shared_ptr<CallBoard> board_handle() const { return board_; }
  // The stuck-rank report for a call that timed out waiting on `peers`: asks
  // each once more (a report from before this moment may be stale, or missing
  // if the wait was short), waits a little for the answers, and describes
  // where each was: "rank 3 is still in allreduce #41 (...), as of 0.00 s
  // ago. " per peer (CallBoard::describe_peer). A peer that waits in this
  // call on another rank leads to that rank, asked in turn, until one that
  // waits on nobody: "rank 3 is in no call: ... (reached through rank 0 ->
  // rank 2 -> rank 3, each waiting on the next)".
  std::string where_are(std::span<const int> peers, uint32_t tag, const CallSignature& mine);
  // What a long wait does every kAnnounceAfter: announces `mine` to `peers`
  // and to the ranks their last reports say they wait on in this call, hop
  // by hop, so that the board holds the whole chain before the deadline
  // (when the ranks along it, timing out too, may no longer answer).
  void announce_along(std::span<const int> peers, uint32_t tag, const CallSignature& mine);
  // The rank `peer` last reported waiting on in call `mine` (-1: none, this
  // rank, or no report).
  int reported_wait(int peer, uint32_t tag, const CallSignature& mine) const;
  // `peer`, then the rank it reported waiting on in call `mine`, and so on,
  // until a rank that waits on nobody (as far as the board knows) or one
  // already listed (a loop).
  std::vector<int> wait_chain(int peer, uint32_t tag, const CallSignature& mine) const;

  // Graceful close: tells peers this rank leaves on purpose. Idempotent.
  virtual void close() = 0;
  // Fails all requests here, now and later, with `code` and `message` (the
  // first failure wins), and tells the peers, which fail theirs with the same
  // code and message (marked "reported by rank N"): every rank gets the
  // verdict of the rank that failed first, not a generic "aborted".
  // `spared`: the calls this rank had finished, which peers still in them
  // finish (Spared).
  virtual void fail(chorus_result_t code, const std::string& message, const Spared& spared) = 0;
  // fail(CHORUS_ERR_ABORTED, "rank R aborted: reason", nothing spared).
  void abort(const std::string& reason);

 private:
  std::shared_ptr<CallBoard> board_ = std::make_shared<CallBoard>();
};

// The error text every transport uses when a message does not fit its
// receive: different calls ("collective mismatch: rank A called X but rank B
// called Y"), or the same call with a different size.
std::string mismatch_message(int their_rank, const CallSignature& theirs, std::size_t their_bytes,
                             int my_rank, const CallSignature& mine, std::size_t my_bytes);

// Waits for every request; drives transport.poll() while spinning. Throws the
// first request's error, or IoError(CHORUS_ERR_TIMEOUT) naming the call (or
// `what`) and the peers still outstanding when the deadline passes. The
// description is only built on timeout.
void wait_all(Transport& transport, std::span<const RequestPtr> requests, const Deadline& deadline,
              Spin spin, const CallSignature& call);
void wait_all(Transport& transport, std::span<const RequestPtr> requests, const Deadline& deadline,
              Spin spin, std::string_view what);
// Whether `peer` is gone (died or left: check_peer throws) while the call
// with this tag and signature is still spared. Throws the call's own failure
// if it is not spared any more. What the verdict round asks of a peer it
// does not hear from (collectives/verdict/agree.hpp).
bool gone_while_spared(Transport& transport, int peer, uint32_t tag, const CallSignature& sig);
// This rank's part of the call is done: marks it on the board
// (CallBoard::Slot::part_done), the point after which a peer that asks finds
// it done. Where a peer sealed it first (it asked on its deadline, or lost
// its connection to this rank), throws that peer's verdict instead, with
// its code: this rank must not finish a call the sealer fails.
// `slot`: the board's slot of tag's space, where the caller holds it.
// Sealed, it waits up to kSealerNoticeWait for the sealer's failure notice.
// After kDrainAfterGap or more since it last came here, it first reads what
// came meanwhile (Transport::drain_input), and fails if a peer failed the
// call meanwhile: an asker waits 2 s for an answer, and a rank that could
// not answer that long must see the ask, and the asker's failure, before it
// marks its part done or finishes. A program calling in a loop never pays.
inline constexpr std::chrono::milliseconds kSealerNoticeWait{500};
inline constexpr std::chrono::milliseconds kDrainAfterGap{250};
void mark_part_done(Transport& transport, CallBoard::Slot& slot, uint32_t tag,
                    const CallSignature& sig);
inline void mark_part_done(Transport& transport, uint32_t tag, const CallSignature& sig) {
  mark_part_done(transport, transport.board().slot(tag), tag, sig);
}

void wait_one(Transport& transport, const RequestPtr& request, const Deadline& deadline, Spin spin,
              const CallSignature& call);
void wait_one(Transport& transport, const RequestPtr& request, const Deadline& deadline, Spin spin,
              std::string_view what);

}  // namespace chorus
