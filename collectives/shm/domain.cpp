#include "collectives/shm/domain.hpp"

#include <fmt/format.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <random>
#include <vector>

#include "base/core/completion.hpp"
#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "transports/transport.hpp"

namespace chorus::shm {
namespace {

spdlog::logger& shm_log() {
  static spdlog::logger& subsystem = logger("shm");  // the registry locks a mutex
  return subsystem;
}

constexpr uint64_t kMagic = 0x43484f5255535348ULL;  // "CHORUSSH"
constexpr uint32_t kVersion = 5;
constexpr std::size_t kAlign = 64;
// How often a sleeping waiter wakes to ask the control channel about peers.
constexpr auto kHealthSlice = std::chrono::milliseconds(10);

struct alignas(64) Header {
  uint64_t magic;
  uint32_t version;
  int32_t ranks;
  int32_t slots;
  uint64_t piece_bytes;
  uint64_t small_bytes;
  uint64_t total_bytes;
  uint64_t base_piece_bytes;
};

std::size_t round_up(std::size_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}

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

std::string random_suffix() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

std::string describe_layout(const Layout& l) {
  return fmt::format(
      "{} ranks, {} slots of {} x {} bytes (pieces from {}), small buffers of {} bytes", l.ranks,
      l.slots, l.ranks, l.piece_bytes, l.base_piece(), l.small_bytes);
}

}  // namespace

std::size_t call_piece_bytes(const Layout& layout, std::size_t total) {
  const std::size_t low = layout.base_piece();
  if (layout.piece_bytes <= low) return layout.piece_bytes;
  const std::size_t per_round = static_cast<std::size_t>(layout.ranks) * kMinRounds;
  const std::size_t want = round_up((total + per_round - 1) / per_round);
  return std::clamp(want, low, layout.piece_bytes);
}

// --- layout ---------------------------------------------------------------

namespace {
struct RankArea {
  std::size_t control, small, staging, total;
};
RankArea rank_area(const Layout& l) {
  RankArea a{};
  a.control = round_up(64 * (kCounterCount + 1));  // counters, announcement
  a.small = round_up(kMailHeaderBytes + l.small_bytes) * 2;
  a.staging = round_up(l.slot_bytes()) * static_cast<std::size_t>(l.slots);
  a.total = a.control + a.small + a.staging;
  return a;
}
}  // namespace

// The header, then one cache line per counter kind for the totals, then the
// mail sleepers' line.
std::size_t totals_offset() {
  return round_up(sizeof(Header));
}
std::size_t mail_sleepers_offset() {
  return totals_offset() + kAlign * kCounterCount;
}

std::size_t Layout::control_offset(int rank) const {
  return mail_sleepers_offset() + kAlign + rank_area(*this).total * static_cast<std::size_t>(rank);
}
std::size_t Layout::small_offset(int rank, int parity) const {
  auto a = rank_area(*this);
  return control_offset(rank) + a.control +
         round_up(kMailHeaderBytes + small_bytes) * static_cast<std::size_t>(parity);
}
std::size_t Layout::staging_offset(int rank, int slot) const {
  auto a = rank_area(*this);
  return control_offset(rank) + a.control + a.small +
         round_up(slot_bytes()) * static_cast<std::size_t>(slot);
}
std::size_t Layout::total_bytes() const {
  return control_offset(ranks);
}

// --- set-up ---------------------------------------------------------------

Domain::Domain(const Options& options, Segment segment)
    : rank_(options.rank),
      layout_(options.layout),
      segment_(std::move(segment)),
      options_(options) {
  static_assert(sizeof(MailHeader) == kMailHeaderBytes);
  for (int r = 0; r < layout_.ranks; ++r) {
    controls_.push_back(reinterpret_cast<Control*>(segment_.data() + layout_.control_offset(r)));
    for (int parity = 0; parity < 2; ++parity)
      mails_.push_back(segment_.data() + layout_.small_offset(r, parity));
  }
}

Domain::~Domain() = default;

const Layout& layout_of(const Domain& domain) {
  return domain.layout();
}

std::unique_ptr<Domain> Domain::join(Store& store, const Options& o) {
  const Layout& layout = o.layout;
  CHORUS_CHECK(layout.ranks >= 1 && o.rank >= 0 && o.rank < layout.ranks, "ranks {} rank {}",
               layout.ranks, o.rank);
  CHORUS_CHECK(layout.piece_bytes % kAlign == 0 && layout.piece_bytes > 0, "piece_bytes {}",
               layout.piece_bytes);
  CHORUS_CHECK(layout.small_bytes % kAlign == 0, "small_bytes {}", layout.small_bytes);
  CHORUS_CHECK(
      layout.base_piece_bytes % kAlign == 0 && layout.base_piece_bytes <= layout.piece_bytes,
      "base_piece_bytes {} piece_bytes {}", layout.base_piece_bytes, layout.piece_bytes);
  CHORUS_CHECK(layout.slots >= 2, "slots {}", layout.slots);
  const std::string name_key = o.key_prefix + "shm/name";
  const std::size_t total = layout.total_bytes();

  // Every rank reports whether it mapped the segment; all of them then agree
  // on using it or not, so that no rank waits in a segment the others left.
  Segment segment;
  std::string status = "ok";
  try {
    if (o.rank == 0) {
      std::string name = o.name_prefix + random_suffix();
      try {
        segment = Segment::create(name, total);
      } catch (const Error& e) {
        store.set(name_key, "");
        throw;
      }
      auto* header = new (segment.data()) Header{};
      header->magic = kMagic;
      header->version = kVersion;
      header->ranks = layout.ranks;
      header->slots = layout.slots;
      header->piece_bytes = layout.piece_bytes;
      header->small_bytes = layout.small_bytes;
      header->total_bytes = total;
      header->base_piece_bytes = layout.base_piece();
      store.set(name_key, name);
    } else {
      std::string name = store.get(name_key, o.deadline);
      if (name.empty()) throw IoError(CHORUS_ERR_IO, "rank 0 could not create the segment");
      segment = Segment::open(name, total);
      auto* header = reinterpret_cast<const Header*>(segment.data());
      if (header->magic != kMagic || header->version != kVersion || header->ranks != layout.ranks ||
          header->slots != layout.slots || header->piece_bytes != layout.piece_bytes ||
          header->small_bytes != layout.small_bytes || header->total_bytes != total ||
          header->base_piece_bytes != layout.base_piece())
        throw IoError(
            CHORUS_ERR_MISMATCH,
            fmt::format("segment {} was laid out for {} ranks / {} slots / {}-byte "
                        "pieces (from {}) / {}-byte small buffers; this rank expects {}",
                        name, header->ranks, header->slots, header->piece_bytes,
                        header->base_piece_bytes, header->small_bytes, describe_layout(layout)));
    }
  } catch (const Error& e) {
    status = e.what();
  }
  store.set(fmt::format("{}shm/joined/{}", o.key_prefix, o.rank), status);
  std::vector<std::string> problems;
  for (int r = 0; r < layout.ranks; ++r) {
    std::string s = store.get(fmt::format("{}shm/joined/{}", o.key_prefix, r), o.deadline);
    if (s != "ok") problems.push_back(fmt::format("rank {}: {}", r, s));
  }
  // Everyone has mapped it (or given up): the name can go.
  if (o.rank == 0) segment.unlink();
  if (!problems.empty()) {
    shm_log().warn(
        "rank {}: shared-memory collectives unavailable ({}); using the point-to-point "
        "transport",
        o.rank, fmt::join(problems, "; "));
    return nullptr;
  }
  shm_log().debug("rank {}: joined shared-memory segment {} ({} bytes: {})", o.rank, segment.name(),
                  total, describe_layout(layout));
  return std::unique_ptr<Domain>(new Domain(o, std::move(segment)));
}

// --- access ---------------------------------------------------------------

Domain::MailHeader& Domain::mail(int rank, uint64_t mail_call) const {
  return *reinterpret_cast<MailHeader*>(mails_[static_cast<std::size_t>(rank) * 2 + mail_call % 2]);
}

std::byte* Domain::small_buffer(int rank, uint64_t mail_call) const {
  return reinterpret_cast<std::byte*>(&mail(rank, mail_call)) + kMailHeaderBytes;
}

std::byte* Domain::staging(int rank, uint64_t round) const {
  return segment_.data() +
         layout_.staging_offset(rank,
                                static_cast<int>(round % static_cast<uint64_t>(layout_.slots)));
}

Domain::Control& Domain::control(int rank) const {
  return *controls_[static_cast<std::size_t>(rank)];
}

Domain::SharedCounter& Domain::total(Counter c) const {
  return *reinterpret_cast<SharedCounter*>(segment_.data() + totals_offset() +
                                           kAlign * static_cast<std::size_t>(c));
}

Domain::SharedCounter& Domain::counter(int rank, Counter c) const {
  return control(rank).counters[static_cast<int>(c)];
}

uint64_t Domain::take_rounds(uint64_t count) {
  uint64_t first = next_round_;
  next_round_ += count;
  return first;
}

uint64_t Domain::take_barrier() {
  return next_barrier_++;
}

uint64_t Domain::take_mail_call() {
  return next_mail_++;
}

Domain::SharedCounter& Domain::mail_sleepers() const {
  return *reinterpret_cast<SharedCounter*>(segment_.data() + mail_sleepers_offset());
}

// --- call announcements -----------------------------------------------------

void Domain::announce(const CallSignature& call) {
  Announcement& a = control(rank_).announcement;
  a.seq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(static_cast<void*>(&a.sig), &call, sizeof call);
  a.seq.store(call.seq, std::memory_order_release);
}

bool Domain::read_announcement(int rank, CallSignature& out) const {
  const Announcement& a = control(rank).announcement;
  const uint64_t seq = a.seq.load(std::memory_order_acquire);
  if (seq == 0) return false;
  std::memcpy(&out, static_cast<const void*>(&a.sig), sizeof out);
  std::atomic_thread_fence(std::memory_order_acquire);
  return a.seq.load(std::memory_order_relaxed) == seq;  // else rewritten meanwhile
}

void Domain::check_announcement_of(int rank, const CallSignature& call) const {
  CallSignature theirs;
  if (!read_announcement(rank, theirs) || theirs.seq != call.seq || theirs == call) return;
  throw IoError(CHORUS_ERR_MISMATCH,
                mismatch_message(named(rank), theirs, 0, named(rank_), call, 0));
}

void Domain::check_announcements(const CallSignature& call) const {
  for (int r = 0; r < layout_.ranks; ++r)
    if (r != rank_) check_announcement_of(r, call);
}

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
