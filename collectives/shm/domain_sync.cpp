// The domain's synchronisation (collectives/shm/domain.hpp): counters that
// ranks publish and wait on, the checks that turn a stuck wait into a named
// verdict, and the latency path's mail. Set-up and layout: domain.cpp.
#include <fmt/format.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "base/core/completion.hpp"
#include "base/core/error.hpp"
#include "collectives/shm/domain.hpp"
#include "transports/transport.hpp"

namespace chorus::shm {
namespace {

// How often a sleeping waiter wakes to ask the control channel about peers.
constexpr auto kHealthSlice = std::chrono::milliseconds(10);

// Process-shared futex on a word of the segment (the segment may be mapped at
// different addresses; the kernel keys shared futexes by page, not address).
void futex_wait_shared(const void* word, uint32_t expected, std::chrono::nanoseconds timeout) {
  struct timespec ts;
  ts.tv_sec = timeout.count() / 1000000000;
  ts.tv_nsec = timeout.count() % 1000000000;
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_shared(const void* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

// --- synchronisation ------------------------------------------------------

namespace {
// Counters whose "every rank has reached v" is "their total has reached
// ranks * v": each rank publishes them once per step, and no rank publishes
// step v + 1 before every rank published v. One shared word to sleep on, and
// one wake-up per step (by the rank that completes it) instead of one per rank.
bool totalled(Counter c) {
  return c != Counter::drained;
}
const char* const kCounterNames[] = {"arrival", "staged input", "reduced piece", "drained slot"};
}  // namespace

void Domain::publish(Counter c, uint64_t value) {
  SharedCounter& mine = counter(rank_, c);
  // A compare-exchange where a store would do (the same one locked
  // instruction): a peer whose deadline passed may have sealed this counter
  // (seal_lagging), and then this rank's step must not count.
  uint64_t word = mine.value.load(std::memory_order_relaxed);
  do {
    if (word & kCounterSealed)
      throw IoError(CHORUS_ERR_TIMEOUT,
                    fmt::format("timed out: a peer's deadline passed before rank {} reached step "
                                "{} of its {}",
                                named(rank_), value, kCounterNames[static_cast<int>(c)]));
  } while (!mine.value.compare_exchange_weak(word, value, std::memory_order_seq_cst));
  // Pairs with the waiter's sleepers increment + re-check (both seq_cst).
  if (totalled(c)) {
    SharedCounter& sum = total(c);
    uint64_t now = sum.value.fetch_add(1, std::memory_order_seq_cst) + 1;
    if (now % static_cast<uint64_t>(layout_.ranks) == 0 &&
        sum.sleepers.load(std::memory_order_seq_cst) != 0)
      futex_wake_shared(&sum.value);
  } else if (mine.sleepers.load(std::memory_order_seq_cst) != 0) {
    futex_wake_shared(&mine.value);
  }
}

uint64_t Domain::step(int r, Counter c) const {
  // A sealed counter stays where it was: no rank goes past it.
  return counter(r, c).value.load(std::memory_order_acquire) & ~kCounterSealed;
}

int Domain::first_behind(Counter c, uint64_t value, int from) const {
  for (int i = 0; i < layout_.ranks; ++i) {
    int r = (from + i) % layout_.ranks;
    if (step(r, c) < value) return r;
  }
  return -1;
}

void Domain::seal_lagging(Counter c, uint64_t value, const WaitSpec& spec,
                          const std::vector<char>* gone) {
  // This rank's own step is published: were it to fail now, the lagging
  // ranks could still reach the step and finish the call with it. Sealing
  // one of them first makes that impossible (publish fails there), and no
  // rank passes this step; one that reached it meanwhile ends nothing.
  for (int r = 0; r < layout_.ranks; ++r) {
    if (r == rank_ || (gone && !gone->empty() && (*gone)[static_cast<std::size_t>(r)])) continue;
    SharedCounter& theirs = counter(r, c);
    uint64_t word = theirs.value.load(std::memory_order_acquire);
    while (!(word & kCounterSealed) && word < value) {
      if (theirs.value.compare_exchange_weak(word, word | kCounterSealed,
                                             std::memory_order_seq_cst)) {
        futex_wake_shared(&theirs.value);  // the others waiting on it fail too
        if (totalled(c)) futex_wake_shared(&total(c).value);
        throw_timeout(c, value, spec);
      }
    }
    if (word & kCounterSealed) throw_timeout(c, value, spec);  // another waiter sealed it
  }
}

template <typename Ready, typename WatchFn, typename TimedOut>
void Domain::wait_until(Ready&& ready, WatchFn&& watch, const WaitSpec& spec,
                        TimedOut&& timed_out) {
  if (ready()) return;
  WaitScope scope(spec.spin);
  if (spec.spin.us > 0 && worth_polling(spec.spin)) {
    // The clock starts at the first time check: most waits end before it,
    // and a clock read is a good part of a latency-path call.
    Clock::time_point spin_until{};
    unsigned round = 0;
    while (true) {
      spin_step(spec.spin, round);  // a partner that shares our core can run
      if (ready()) return;
      if (spec.spin.yield_each || (round & 63) == 0) {
        const auto now = Clock::now();
        if (spin_until == Clock::time_point{})
          spin_until = now + std::chrono::microseconds(spec.spin.us);
        else if (now >= spin_until)
          break;
      }
    }
  }
  // A long wait announces its call over the control channel, as waits on
  // the transport do: the answers say where each peer is (for the timeout's
  // report), and a peer waiting in another call there fails as a mismatch.
  auto announce_at = Clock::now() + Transport::kAnnounceAfter;
  while (true) {
    // A peer that died, aborted or left (destroyed its communicator) ends
    // the wait at once: none of them will ever post its part. Only a rank
    // that has not posted yet is asked (watch().rank; all when none is
    // known): one that died after posting its part (a failure that spares
    // this call, Spared) does not end a wait on another's.
    if (spec.control) {
      const int watched = watch().rank;
      const int awaited = watched == rank_ ? -1 : watched;
      try {
        for (int r = 0; r < layout_.ranks; ++r)
          if (r != rank_ && (awaited < 0 || r == awaited)) check_peer(r, spec);
      } catch (const IoError&) {
        // A peer posts its part before it leaves: one that posted and left
        // since the last look has not failed this wait.
        if (ready()) return;
        throw;
      }
    }
    if (spec.call) check_announcements(*spec.call);
    if (spec.control && spec.call && Clock::now() >= announce_at) {
      announce_at = Clock::now() + Transport::kAnnounceAfter;
      std::vector<int> peers;
      for (int r = 0; r < layout_.ranks; ++r)
        if (r != rank_) peers.push_back(named(r));
      spec.control->announce_along(peers, spec.tag, *spec.call);
      // Which rank this wait is on, for the peers' reports (a chain of
      // waits through a hierarchical call's stages leads to it).
      const int lagging = watch().rank;
      if (lagging >= 0 && lagging != rank_)
        spec.control->board().waiting(spec.tag, *spec.call, named(lagging));
      spec.control->check_announced(spec.tag, *spec.call);
    }
    if (spec.deadline.expired()) timed_out();
    const Watch w = watch();
    // Counted before the last look: a poster that changes the word after it
    // sees the count and wakes us; one that changed it before fails the wait.
    w.sleepers->fetch_add(1, std::memory_order_seq_cst);
    const uint64_t seen = w.word->load(std::memory_order_seq_cst);
    // ready() may move on to another lagging rank's word: then look again
    // instead of sleeping on a word nobody is going to change soon.
    if (!ready() && watch().word == w.word)
      futex_wait_shared(
          w.word, static_cast<uint32_t>(seen),
          std::min<std::chrono::nanoseconds>(spec.deadline.remaining(), kHealthSlice));
    w.sleepers->fetch_sub(1, std::memory_order_seq_cst);
    if (ready()) return;
  }
}

void Domain::wait_all(Counter c, uint64_t value, const WaitSpec& spec) {
  // What to watch: the total (target ranks * value), or the lagging rank.
  const bool summed = totalled(c);
  const uint64_t target = summed ? value * static_cast<uint64_t>(layout_.ranks) : value;
  int behind = 0;
  auto ready = [&] {
    if (summed) return total(c).value.load(std::memory_order_acquire) >= target;
    behind = first_behind(c, value, behind);
    return behind < 0;
  };
  auto watch = [&] {
    SharedCounter& w = summed ? total(c) : counter(behind, c);
    // A summed wait sleeps on the total, and health-checks a rank that has
    // not posted yet (each rank's own count is set before the total).
    return Watch{&w.value, &w.sleepers, summed ? first_behind(c, value, 0) : behind};
  };
  wait_until(ready, watch, spec, [&] { seal_lagging(c, value, spec, nullptr); });
}

void Domain::wait_present(Counter c, uint64_t value, const WaitSpec& spec) {
  CHORUS_CHECK(totalled(c), "wait_present on counter {}, which is not totalled",
               static_cast<int>(c));
  const uint64_t target = value * static_cast<uint64_t>(layout_.ranks);
  std::vector<char> gone;  // sized once a rank is found gone
  int behind = 0;
  auto ready = [&] {
    if (total(c).value.load(std::memory_order_acquire) >= target) return true;
    for (int i = 0; i < layout_.ranks; ++i) {
      const int r = (behind + i) % layout_.ranks;
      if (step(r, c) < value && (gone.empty() || !gone[static_cast<std::size_t>(r)])) {
        behind = r;
        return false;
      }
    }
    return true;
  };
  auto watch = [&] { return Watch{&total(c).value, &total(c).sleepers, behind}; };
  WaitSpec marking = spec;
  marking.gone = &gone;
  wait_until(ready, watch, marking, [&] { seal_lagging(c, value, spec, &gone); });
}

void Domain::check_peer(int r, const WaitSpec& spec) const {
  const CallSignature call = spec.call ? *spec.call : CallSignature{};
  if (!spec.gone) {
    spec.control->check_peer(named(r), spec.tag, call);
    return;
  }
  if (!gone_while_spared(*spec.control, named(r), spec.tag, call)) return;
  if (spec.gone->empty()) spec.gone->assign(static_cast<std::size_t>(layout_.ranks), 0);
  (*spec.gone)[static_cast<std::size_t>(r)] = 1;
}

// --- the latency path's mail ------------------------------------------------

void Domain::post_mail(uint64_t call, uint64_t digest) {
  MailHeader& m = mail(rank_, call);
  m.digest = digest;
  // A compare-exchange where a store would do: a peer whose deadline passed
  // may have sealed this word (wait_mail), and then this rank's input must
  // not count. (It costs what the seq_cst store did: one locked instruction.)
  uint64_t word = m.posted.load(std::memory_order_relaxed);
  do {
    if (word == sealed_mail(call))
      throw IoError(CHORUS_ERR_TIMEOUT,
                    fmt::format("timed out: a peer's deadline passed before rank {} posted its "
                                "input (mail call {})",
                                named(rank_), call));
  } while (!m.posted.compare_exchange_weak(word, call + 1, std::memory_order_seq_cst));
  // Pairs with the sleeper's count + re-check (both seq_cst). The count's
  // line is written only by sleepers, so while nobody sleeps this read hits
  // this core's cache.
  if (mail_sleepers().sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_shared(&m.posted);
}

void Domain::wait_mail(uint64_t call, const CallSignature& sig, uint64_t digest,
                       const WaitSpec& spec) {
  for (int r = 0; r < layout_.ranks; ++r) {
    if (r == rank_) continue;
    MailHeader& m = mail(r, call);
    auto ready = [&] { return m.posted.load(std::memory_order_acquire) > call; };
    auto watch = [&] { return Watch{&m.posted, &mail_sleepers().sleepers, r}; };
    wait_until(ready, watch, spec, [&] {
      // This rank's input is posted: were it to fail now, rank r could post
      // and finish the call from it. Sealing r's word first makes that
      // impossible (post_mail); if r posted meanwhile, the wait is over.
      uint64_t word = m.posted.load(std::memory_order_acquire);
      while (word <= call) {
        if (m.posted.compare_exchange_weak(word, sealed_mail(call), std::memory_order_seq_cst)) {
          futex_wake_shared(&m.posted);  // the others waiting on it fail too
          throw IoError(CHORUS_ERR_TIMEOUT,
                        fmt::format("{}rank {}: {} timed out in shared memory waiting for rank "
                                    "{} to post its input (mail call {})",
                                    where_are({named(r)}, spec), named(rank_), describe(sig),
                                    named(r), call));
        }
      }
    });
    const uint64_t posted = m.posted.load(std::memory_order_acquire);
    if (posted == sealed_mail(call))  // by another rank whose deadline passed first
      throw IoError(
          CHORUS_ERR_TIMEOUT,
          fmt::format("{}rank {}: {} timed out in shared memory waiting for rank {} to "
                      "post its input (mail call {}; a peer's deadline passed first)",
                      where_are({named(r)}, spec), named(rank_), describe(sig), named(r), call));
    CHORUS_CHECK(posted == call + 1, "rank {} posted mail call {} while rank {} waits for {}", r,
                 posted - 1, rank_, call);
    if (m.digest == digest) continue;
    // Its announcement (written before it posted, and kept while it fails
    // on this same mismatch) names its call.
    CallSignature theirs;
    if (read_announcement(r, theirs) && !(theirs == sig))
      throw IoError(CHORUS_ERR_MISMATCH,
                    mismatch_message(named(r), theirs, 0, named(rank_), sig, 0));
    throw IoError(CHORUS_ERR_MISMATCH,
                  fmt::format("rank {} posted another call than rank {}'s {} (mail call {})",
                              named(r), named(rank_), describe(sig), call));
  }
}

void Domain::throw_timeout(Counter c, uint64_t value, const WaitSpec& spec) const {
  std::vector<int> lagging;
  for (int r = 0; r < layout_.ranks; ++r)
    if (step(r, c) < value) lagging.push_back(named(r));
  throw IoError(CHORUS_ERR_TIMEOUT,
                fmt::format("{}rank {}: {} timed out in shared memory waiting for the {} of "
                            "rank(s) {} (step {})",
                            where_are(lagging, spec), named(rank_),
                            spec.call ? describe(*spec.call) : std::string("wait"),
                            kCounterNames[static_cast<int>(c)], fmt::join(lagging, ", "), value));
}

std::string Domain::where_are(const std::vector<int>& ranks, const WaitSpec& spec) const {
  if (!spec.control || !spec.call) return {};
  return spec.control->where_are(ranks, spec.tag, *spec.call);
}

}  // namespace chorus::shm
