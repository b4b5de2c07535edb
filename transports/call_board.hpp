// The call board: where this rank and its peers are in each communicator's
// calls, for the stuck-rank report.
//
// Terms:
//   space     a communicator's tag space (tag >> Spared::kSpaceShift): its
//             collectives share one sequence of call numbers
//   progress  per space, the call a rank is in (seq 0: none) and the last
//             call it finished
//   report    a peer's progress as it last told it, and when
//
// How reports travel: a wait that has lasted a while announces its call to
// the peers it waits on (Transport::announce); a transport that carries
// announcements answers each with this rank's progress in that space (TCP: a
// status frame), and the waiter keeps the answer here. When the waiter's
// deadline passes, its error says for each peer it waited on where that peer
// was: "rank 3 is still in allreduce #41 (...)" instead of only "timed out".
//
// The board also keeps what this rank vouches for when a live peer loses
// its connection to it (Slot::part_done / vouch, tcp_probe.cpp), and the
// results a survivor may ask for (Slot::keep, collectives/verdict/recover.hpp).
//
// The communicator marks its own calls (enter / leave). Transports that route
// over others share one board, so the channel that answers reads the
// progress the communicator marked.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/core/contract.hpp"
#include "include/chorus.h"

namespace chorus {

struct Spared;

struct CallProgress {
  CallSignature current{};   // the call the rank is in; seq 0: in none
  CallSignature finished{};  // the last call it finished; seq 0: none yet
  int32_t waiting_on = -1;   // in `current`, the peer its long wait is on (-1: not known)
};

class CallBoard {
 public:
  using Clock = std::chrono::steady_clock;
  struct Report {
    CallProgress progress;
    Clock::time_point when;
  };

  // This rank's progress in one space. Written on every call, so it takes no
  // lock: one thread writes at a time (the one running the communicator's
  // call; calls take turns), any may read (a sequence lock over atomic
  // words: the writer never waits, a reader retries a torn read).
  class Slot {
   public:
    void enter(const CallSignature& sig);
    // `finished`: the call succeeded here (a failed call is left, not finished).
    void leave(const CallSignature& sig, bool finished);
    // In the call it is in, this rank's wait has lasted a while, on `peer`.
    void waiting(const CallSignature& sig, int peer);
    // This rank's own part of the call is done (what it sends and receives
    // has; only the verdict round is left). False once the rank has vouched
    // for less (vouch): then it must not take part in the round, and fails.
    bool part_done(const CallSignature& sig);
    // What this rank tells a live peer that lost its connection to it
    // (tcp_probe.cpp), or one that failed a call with `code` and asks about
    // it (tcp_recover.cpp): the last call whose part it has done, or
    // finished. Sealed from then on: no later call's part can be done
    // (part_done), so what it said stays true whichever peer asks, and when.
    uint64_t vouch(chorus_result_t code = CHORUS_ERR_PEER_FAILURE);
    // Whether `gap` or more has passed since this rank last came to the end
    // of its part of a call in this space (mark_part_done, which calls it
    // each time), on the coarse clock: the rank may not have run for that
    // long (stopped, or starved of its core), and an ask may wait unread.
    bool long_since_part_done(std::chrono::milliseconds gap);
    // What this rank tells a peer whose deadline passed in call `seq` while
    // it waited on this rank (CollectiveContext::wait, the verdict round):
    // true when its part of that call, or of a later one, is done (what it
    // sends is on its way), and then nothing is sealed; false when it is
    // not, and then it is sealed as by vouch(code): it will not do that part.
    bool done_or_seal(uint64_t seq, chorus_result_t code);
    // The code of the failure that sealed this slot (the asker's verdict,
    // which a call that finds itself sealed takes too): the first sealer's.
    chorus_result_t seal_code() const;
    // The result of replicated call `sig` (collectives/verdict/recover.hpp),
    // kept before its part is marked done, for a survivor that failed it.
    void keep(const CallSignature& sig, std::span<const std::byte> result);
    // Copies the kept result of call `seq` into `out`; false if it is not
    // kept (not a replicated call, or not one of the two latest).
    bool kept(uint64_t seq, std::vector<std::byte>& out) const;
    // The same, with the call's signature; nullopt if not kept.
    std::optional<CallSignature> kept_call(uint64_t seq, std::vector<std::byte>& out) const;
    CallProgress read() const;

   private:
    static constexpr std::size_t kWords = (sizeof(CallProgress) + 7) / 8;
    CallProgress load_relaxed() const;  // the writer's view: no torn read possible
    void write(const CallProgress& p);
    std::atomic<uint64_t> version_{0};  // odd while a write is under way
    std::array<std::atomic<uint64_t>, kWords> words_{};
    // The last call whose part is done, shifted left by kSeqShift; bit 0:
    // sealed; bits 1-7: the sealer's code. One word, so that part_done and
    // vouch (other threads) race safely.
    static constexpr uint64_t kSealed = 1;
    static constexpr unsigned kCodeShift = 1;
    static constexpr uint64_t kCodeMask = 0x7f;
    static constexpr unsigned kSeqShift = 8;
    static uint64_t sealed_word(uint64_t word, chorus_result_t code);
    std::atomic<uint64_t> part_{0};
    // long_since_part_done's last reading, in ms of the coarse clock; only
    // the thread running the call reads and writes it (calls take turns).
    std::atomic<int64_t> part_done_ms_{0};
    // The two latest kept results, by sequence number's parity: a rank asked
    // about call k may already be keeping k + 1 (which then fails, sealed).
    struct Kept {
      CallSignature sig;
      std::vector<std::byte> bytes;
    };
    mutable std::mutex kept_mu_;  // a leaf, as mu_ below; guards kept_
    std::array<Kept, 2> kept_;
  };

  // The slot of tag's space, made on first use; it lives as long as the board.
  Slot& slot(uint32_t tag);
  // The same for the space's slot if it exists (waits on point-to-point tags
  // have none).
  void waiting(uint32_t tag, const CallSignature& sig, int peer);
  CallProgress progress(uint32_t tag) const;
  // Per space, the last call finished: what a failure here spares (Spared).
  Spared spared() const;
  // Per space, the call this rank is in, or else the last it finished: what a
  // peer's death spares where everything the peer sent before it died has
  // arrived (TcpTransport::peer_lost).
  Spared started() const;
  // Per space, Slot::vouch: what this rank tells a live peer that lost its
  // connection to it (tcp_probe.cpp). For those calls it needs nothing more
  // from that peer but its have, and the peer nothing more from it.
  Spared vouch();
  // What a rank that leaves hands its peers (TcpTransport::close): per
  // space, vouched for as by vouch(), the kept results of the calls whose
  // part it did, so that a peer that fails one of them later (its deadline
  // passed on a third rank that did not answer) takes the result still.
  struct KeptResult {
    uint32_t space = 0;
    CallSignature sig;
    std::vector<std::byte> bytes;
  };
  std::vector<KeptResult> parting();

  void heard(int peer, uint32_t tag, const CallProgress& progress);
  std::optional<Report> report(int peer, uint32_t tag) const;
  // "rank 3 is still in allreduce #41 (...), as of 0.1 s ago": where `peer`
  // was, by its last report, relative to this rank's call `mine`.
  std::string describe_peer(int peer, uint32_t tag, const CallSignature& mine) const;

  static uint32_t space_of(uint32_t tag);

 private:
  // A leaf: taken under the transports' own locks, never held while taking
  // another. Guards the maps, not the slots' contents.
  mutable std::mutex mu_;
  std::map<uint32_t, Slot> own_;                         // by space (nodes never move)
  std::map<std::pair<int, uint32_t>, Report> reported_;  // by (peer, space)
};

}  // namespace chorus
