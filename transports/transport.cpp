#include "transports/transport.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "base/core/error.hpp"

namespace chorus {

bool FailureRecord::take(chorus_result_t code_in, const std::string& message,
                         const std::string& local_message, const Spared& spared_in) {
  if (!error) {
    error = io_error(code_in, local_message.empty() ? message : local_message);
    spared = spared_in;
    code = code_in;
    text = message;
    return true;
  }
  Spared narrowed = spared.narrowed_by(spared_in);
  if (narrowed == spared) return false;
  spared = std::move(narrowed);
  return true;
}

RequestPtr Transport::isend_gather(int peer, uint32_t, const CallSignature&,
                                   std::span<const std::span<const std::byte>> pieces) {
  throw InvariantError(fmt::format("the {} transport does not gather sends ({} pieces to rank {})",
                                   name(), pieces.size(), peer));
}

RequestPtr Transport::irecv_scatter(int peer, uint32_t, const CallSignature&,
                                    std::span<const std::span<std::byte>> pieces) {
  throw InvariantError(
      fmt::format("the {} transport does not scatter receives ({} pieces from rank {})", name(),
                  pieces.size(), peer));
}

void Transport::abort(const std::string& reason) {
  fail(CHORUS_ERR_ABORTED, fmt::format("rank {} aborted: {}", rank(), reason), Spared{});
}

int Transport::reported_wait(int peer, uint32_t tag, const CallSignature& mine) const {
  if (!is_collective_tag(tag)) return -1;  // a number is not a call there
  const auto r = board().report(peer, tag);
  if (!r || r->progress.current.seq != mine.seq || mine.seq == 0) return -1;
  const int next = r->progress.waiting_on;
  return next >= 0 && next < size() && next != rank() ? next : -1;
}

std::vector<int> Transport::wait_chain(int peer, uint32_t tag, const CallSignature& mine) const {
  std::vector<int> chain{peer};
  for (int w = reported_wait(peer, tag, mine);
       w >= 0 && std::find(chain.begin(), chain.end(), w) == chain.end();
       w = reported_wait(w, tag, mine))
    chain.push_back(w);
  return chain;
}

void Transport::announce_along(std::span<const int> peers, uint32_t tag,
                               const CallSignature& mine) {
  std::vector<int> told;
  for (int peer : peers)
    for (int r : wait_chain(peer, tag, mine))
      if (std::find(told.begin(), told.end(), r) == told.end()) {
        announce(r, tag, mine);
        told.push_back(r);
      }
}

std::string Transport::where_are(std::span<const int> peers, uint32_t tag,
                                 const CallSignature& mine) {
  // Long enough for a loaded host to answer, short against the deadline
  // that has just passed; paid only on a timeout (once per new hop below).
  constexpr auto kLastAsk = std::chrono::milliseconds(250);
  if (reports_progress()) {
    // A peer that waits in this call on another rank is not the end of the
    // story: a hierarchical call's stages chain ranks (a rank waits on its
    // host's representative, which waits on another host's), so the rank it
    // waits on is asked too, hop by hop. A rank that does not answer (it
    // timed out as well) keeps the report its long wait gathered.
    std::vector<int> asked, ask(peers.begin(), peers.end());
    while (!ask.empty() && asked.size() < static_cast<std::size_t>(size())) {
      const auto when = CallBoard::Clock::now();
      for (int peer : ask) announce(peer, tag, mine);
      auto answered = [&] {
        for (int peer : ask) {
          const auto r = board().report(peer, tag);
          if (!r || r->when < when) return false;
        }
        return true;
      };
      while (!answered() && CallBoard::Clock::now() < when + kLastAsk)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      asked.insert(asked.end(), ask.begin(), ask.end());
      std::vector<int> next;
      for (int peer : ask) {
        const int w = reported_wait(peer, tag, mine);
        if (w >= 0 && std::find(asked.begin(), asked.end(), w) == asked.end() &&
            std::find(next.begin(), next.end(), w) == next.end())
          next.push_back(w);
      }
      ask = std::move(next);
    }
  }
  std::string out;
  for (int peer : peers) {
    // Follow the waits to a rank that waits on nobody in this call; a chain
    // that comes back on itself or to this rank, or reaches a rank that never
    // reported, describes the peer alone.
    const std::vector<int> chain = wait_chain(peer, tag, mine);
    const auto last = board().report(chain.back(), tag);
    const bool ends =
        last && reported_wait(chain.back(), tag, mine) < 0 && last->progress.waiting_on != rank();
    if (chain.size() > 1 && ends)
      out += fmt::format("{} (reached through rank {}, each waiting on the next). ",
                         board().describe_peer(chain.back(), tag, mine),
                         fmt::join(chain, " -> rank "));
    else
      out += board().describe_peer(peer, tag, mine) + ". ";
  }
  return out;
}

namespace {

// The first request not yet done (null when all are), and whether any failed.
Request* first_pending(std::span<const RequestPtr> requests, bool* any_failed) {
  Request* pending = nullptr;
  *any_failed = false;
  for (const auto& r : requests) {
    if (!r) continue;
    if (r->completion().failed()) *any_failed = true;
    if (!pending && !r->done()) pending = r.get();
  }
  return pending;
}

template <typename Describe>
void wait_all_impl(Transport& transport, std::span<const RequestPtr> requests,
                   const Deadline& deadline, Spin spin, Describe&& describe_call) {
  // Spin on all requests at once, driving the transport; then let the
  // transport put this thread to sleep until they are done. A failure ends
  // the wait at once: the others may never complete.
  bool failed = false;
  Request* pending = first_pending(requests, &failed);
  if (pending && !failed) {
    WaitScope scope(spin);
    // Ended however the wait ends: a transport whose progress thread stands
    // aside while a waiter spins (TCP) would otherwise stand aside for good
    // after a wait that threw, and nothing would read its sockets again (a
    // survivor's question about the failed call went unanswered).
    transport.spin_begin();
    struct SpinEnd {
      Transport& t;
      ~SpinEnd() { t.spin_end(); }
    } spin_end_guard{transport};
    // Each poll here is a system call (epoll, or UCX's progress). It yields
    // the core only where the wait policy says (wait_policy.hpp): beside
    // CPU-bound processes a yield after every poll cost 1.7-3 ms per 8-byte
    // allreduce of 2 ranks over TCP, a pause 10 us.
    // The clock is read after worth_polling: a probe's yields there may take
    // longer than the whole poll, which a clean probe must not skip.
    const bool poll_first = spin.us > 0 && worth_polling(spin);
    auto now = Clock::now();
    const auto spin_end = now + std::chrono::microseconds(poll_first ? spin.us : 0);
    unsigned round = 0;
    while (pending && !failed && now < spin_end) {
      transport.poll();
      spin_step(spin, round);
      pending = first_pending(requests, &failed);
      now = Clock::now();
    }
    // A long wait may be a mismatch that no message shows (ranks waiting on
    // each other in a cycle, each in another call): tell the peers waited on
    // which call this is, and look at what they said (Transport::announce).
    auto announce_at = Clock::now() + Transport::kAnnounceAfter;
    while (pending && !failed && !deadline.expired()) {
      transport.wait_for_progress(
          *pending,
          std::min<std::chrono::nanoseconds>(deadline.remaining(), std::chrono::milliseconds(10)));
      pending = first_pending(requests, &failed);
      if (pending && !failed && Clock::now() >= announce_at) {
        announce_at = Clock::now() + Transport::kAnnounceAfter;
        std::vector<int> peers;
        for (const auto& r : requests)
          if (r && !r->done() && std::find(peers.begin(), peers.end(), r->peer()) == peers.end())
            peers.push_back(r->peer());
        transport.announce_along(peers, pending->tag(), pending->signature());
        transport.board().waiting(pending->tag(), pending->signature(), pending->peer());
        transport.check_announced(pending->tag(), pending->signature());
      }
    }
  }
  if (pending && !failed) {
    // One last look after the deadline: what arrived in its last instant
    // (a peer's have, just before that peer left) still counts, and the
    // wait ends as it would have a moment earlier.
    transport.poll();
    pending = first_pending(requests, &failed);
  }
  for (const auto& r : requests)
    if (r && r->completion().failed()) r->completion().rethrow_if_failed();
  if (pending) {
    std::string waiting;
    std::vector<int> peers;
    for (const auto& r : requests) {
      if (!r || r->done()) continue;
      if (!waiting.empty()) waiting += ", ";
      waiting += fmt::format("{} rank {}", r->is_send() ? "send to" : "receive from", r->peer());
      if (std::find(peers.begin(), peers.end(), r->peer()) == peers.end())
        peers.push_back(r->peer());
    }
    // Where the peers waited on were comes first: it is what a user needs.
    const std::string where = transport.where_are(peers, pending->tag(), pending->signature());
    throw IoError(CHORUS_ERR_TIMEOUT, fmt::format("{}rank {}: {} timed out waiting on {}", where,
                                                  transport.rank(), describe_call(), waiting));
  }
}

}  // namespace

std::string mismatch_message(int their_rank, const CallSignature& theirs, std::size_t their_bytes,
                             int my_rank, const CallSignature& mine, std::size_t my_bytes) {
  if (theirs == mine)
    return fmt::format("rank {} sent {} bytes for {} but rank {} expected {} bytes", their_rank,
                       their_bytes, describe(theirs), my_rank, my_bytes);
  return fmt::format("collective mismatch: rank {} called {} but rank {} called {}", their_rank,
                     describe(theirs), my_rank, describe(mine));
}

void wait_all(Transport& transport, std::span<const RequestPtr> requests, const Deadline& deadline,
              Spin spin, const CallSignature& call) {
  wait_all_impl(transport, requests, deadline, spin, [&] { return describe(call); });
}

void wait_all(Transport& transport, std::span<const RequestPtr> requests, const Deadline& deadline,
              Spin spin, std::string_view what) {
  wait_all_impl(transport, requests, deadline, spin, [&] { return std::string(what); });
}

bool gone_while_spared(Transport& transport, int peer, uint32_t tag, const CallSignature& sig) {
  transport.check_call(tag, sig);
  try {
    transport.check_peer(peer, tag, sig);
  } catch (const IoError&) {
    transport.check_call(tag, sig);  // the failure that says so may refuse the call
    return true;
  }
  return false;
}

void mark_part_done(Transport& transport, CallBoard::Slot& slot, uint32_t tag,
                    const CallSignature& sig) {
  if (slot.long_since_part_done(kDrainAfterGap)) {
    transport.drain_input();
    // A peer that failed the call meanwhile (it asked, and gave up on the
    // answer) has said so: this rank does not finish it either, even past
    // its commit point (its part done, a release still to send).
    transport.check_call(tag, sig);
  }
  if (slot.part_done(sig)) return;
  // The peer that sealed this rank fails the call right after it asked,
  // and its failure notice, which carries its report of where each rank
  // was, is the verdict then, word for word: it is usually here already or
  // on its way (behind the data of this call on the stream), so it is
  // waited for a moment.
  const Deadline notice_due = Deadline::after(kSealerNoticeWait);
  do {
    transport.poll();
    transport.check_call(tag, sig);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } while (!notice_due.expired());
  const chorus_result_t code = slot.seal_code();
  if (code == CHORUS_ERR_TIMEOUT)
    throw IoError(code, fmt::format("timed out: rank {} was asked by a peer whose deadline "
                                    "passed before this rank's part of {} was done",
                                    transport.rank(), describe(sig)));
  throw IoError(code, fmt::format("peer failure: rank {} was asked about {}, before its part "
                                  "was done, by a peer that failed or lost its connection to it",
                                  transport.rank(), describe(sig)));
}

void wait_one(Transport& transport, const RequestPtr& request, const Deadline& deadline, Spin spin,
              const CallSignature& call) {
  wait_all(transport, std::span<const RequestPtr>(&request, 1), deadline, spin, call);
}

void wait_one(Transport& transport, const RequestPtr& request, const Deadline& deadline, Spin spin,
              std::string_view what) {
  wait_all(transport, std::span<const RequestPtr>(&request, 1), deadline, spin, what);
}

}  // namespace chorus
