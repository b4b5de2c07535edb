// A shared-memory domain: the ranks of one team that share a host, and the
// segment through which they reduce straight from each other's data.
//
// Terms:
//   latency path  allreduces of up to Layout::small_bytes (CHORUS_SHM_SMALL_MAX):
//                 each rank posts its whole input as mail and reduces every
//                 rank's mail itself; one synchronisation per call
//   mail          a rank's input on the latency path, in its Small buffer,
//                 behind a header that says which call it belongs to
//   mail call     the latency-path calls, numbered from 0 per domain
//   pipeline      larger calls, cut into rounds through the staging slots
//                 (collectives/common/shm_pipeline.hpp)
//   round, slot, piece  a round moves one slot per rank; a slot holds one
//                 piece (piece_bytes) per rank
//   announcement  the signature of the call a rank is in, where waiting peers
//                 read it to tell a mismatch from a slow rank
//
// Layout of the segment (every part 64-byte aligned, every counter on its own
// cache line):
//
//   Header | Totals | MailSleepers | per rank r: Control[r] | Small[r][2] |
//   Staging[r][slots]
//
// - Totals: per counter kind, the sum of every rank's publications; "every
//   rank reached v" is "total >= ranks * v" (one word to sleep on, one wake-up
//   per step). The drained counter, waited on with a lag, is not totalled.
// - Control[r]: the monotonic counters rank r publishes (Counter below). They
//   never reset: rounds and barriers are numbered per communicator, and all
//   ranks issue the same calls, so "every rank's counter >= v" is a phase
//   barrier.
// - Small[r][2]: the latency path's mail, used alternately (parity of the
//   mail-call number): a header (the call number and the signature's
//   digest) and right behind it, in the same cache line, the first bytes of
//   rank r's input. One line read from a peer gives its arrival, the
//   mismatch check and, up to kMailInlineBytes, its whole input: one
//   cache-line transfer per peer and call for allreduces up to 48 bytes.
//   On a digest mismatch the peer's announcement names its call.
//   Rank r may overwrite Small[r][c % 2] at call c because finishing call c-1
//   needed every rank's header of c-1, which each rank posts only after it
//   finished reading for c-2.
// - Staging[r][k]: the pipeline's slots, `pieces` (= ranks) pieces of
//   piece_bytes each. Round g uses slot g % slots in every rank.
//
// Waiting: spin for spin_us, then sleep on the counter's low 32 bits with a
// process-shared futex, waking every 10 ms to ask the control channel (the
// point-to-point transport) whether a peer died or aborted, so that a killed
// rank ends every wait within well under a second.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/bootstrap/store.hpp"
#include "base/core/completion.hpp"
#include "base/core/contract.hpp"
#include "base/core/deadline.hpp"
#include "collectives/shm/segment.hpp"

namespace chorus {
class Transport;  // transports/transport.hpp (the control channel)
}

namespace chorus::shm {

struct Layout {
  int ranks = 1;
  int slots = 3;
  std::size_t piece_bytes = 64 * 1024;  // pipeline unit per rank per round; multiple of 64
  std::size_t small_bytes = 32 * 1024;  // latency-path input capacity; multiple of 64
  // The piece of a call too small to fill kMinRounds rounds of piece_bytes
  // (allreduce and reduce take pieces between the two; the other
  // collectives this one); multiple of 64, at most piece_bytes; 0: piece_bytes.
  std::size_t base_piece_bytes = 0;

  std::size_t slot_bytes() const { return piece_bytes * static_cast<std::size_t>(ranks); }
  std::size_t base_piece() const { return base_piece_bytes ? base_piece_bytes : piece_bytes; }
  std::size_t control_offset(int rank) const;
  std::size_t small_offset(int rank, int parity) const;
  std::size_t staging_offset(int rank, int slot) const;
  std::size_t total_bytes() const;
};

// Rounds a pipelined call keeps while its pieces grow from base_piece() to
// piece_bytes: three slots in flight and one being refilled.
inline constexpr std::size_t kMinRounds = 4;

// The piece of an allreduce (or reduce) of `total` bytes: the largest piece,
// within the layout's two bounds and a multiple of 64 bytes, that still
// leaves kMinRounds rounds. Pure, and the same on every rank.
std::size_t call_piece_bytes(const Layout& layout, std::size_t total);

// Input bytes that share the mail header's cache line.
inline constexpr std::size_t kMailHeaderBytes = 16;
inline constexpr std::size_t kMailInlineBytes = 64 - kMailHeaderBytes;

enum class Counter : int {
  arrived = 0,  // barriers this rank has arrived at
  staged = 1,   // pipeline rounds whose input this rank has staged
  reduced = 2,  // rounds whose piece this rank has reduced
  drained = 3,  // rounds this rank has finished reading from the others
};
inline constexpr int kCounterCount = 4;

// What a wait needs besides the counters: when to give up, how long to spin,
// and whom to ask whether a peer failed (its check_peer() throws IoError if
// one did). Built per call: nothing in it allocates or type-erases.
struct WaitSpec {
  Deadline deadline = Deadline::after(std::chrono::hours(24 * 365));
  Spin spin;                            // yield_each when ranks outnumber cores
  Transport* control = nullptr;         // the control channel, asked on health slices
  uint32_t tag = 0;                     // the call's tag (whether a failure spares it)
  const CallSignature* call = nullptr;  // this rank's call: names it, and finds mismatches
  // Set by wait_present: a peer the control channel knows is gone (died or
  // left) while this call is still spared is marked here (by domain rank)
  // instead of ending the wait.
  std::vector<char>* gone = nullptr;
};

class Domain {
 public:
  struct Options {
    int rank = 0;
    Layout layout;
    std::string name_prefix;  // segment_name_prefix(job token)
    std::string key_prefix;   // store namespace of this communicator
    Deadline deadline = Deadline::after(std::chrono::seconds(60));
    // How every wait here polls (wait_policy.hpp); unset: as the call says.
    // With more ranks than cores (oversubscribed) the spin yields the core at
    // every check, which lets the awaited rank run: measured 2-5x faster than
    // sleeping at once for 32K-2M at 4 and 8 ranks on 2 cores, 2-3x for
    // 8-byte calls.
    std::optional<Spin> spin;
    // The job rank of each domain rank, for error messages (empty: the same
    // numbers). The domain's ranks are its team's; errors name job ranks, as
    // the transports' do.
    std::vector<int> job_ranks;
  };
  // Collective over the `layout.ranks` ranks: rank 0 creates the segment,
  // publishes its name in the store, the others map it, and rank 0 unlinks it
  // once all have.
  static std::unique_ptr<Domain> join(Store& store, const Options& options);
  ~Domain();

  int rank() const { return rank_; }
  int size() const { return layout_.ranks; }
  const Layout& layout() const { return layout_; }
  const std::string& segment_name() const { return segment_.name(); }
  const std::optional<Spin>& spin() const { return options_.spin; }

  std::byte* small_buffer(int rank, uint64_t mail_call) const;
  std::byte* staging(int rank, uint64_t round) const;

  // Every call starts by announcing itself; a rank that waits on a peer
  // compares the peer's announcement with its own call and fails with
  // CHORUS_ERR_MISMATCH (naming both ranks and both calls) if they differ.
  void announce(const CallSignature& call);
  // Throws the mismatch error if any rank that announced the same sequence
  // number announced a different call. Ranks already past it, or not there
  // yet, are skipped (they compare with this rank's announcement themselves).
  void check_announcements(const CallSignature& call) const;

  // Publishes this rank's counter (release: what it wrote before is visible
  // to whoever sees the value).
  void publish(Counter counter, uint64_t value);
  // Returns once every rank's counter is >= value (acquire).
  void wait_all(Counter counter, uint64_t value, const WaitSpec& spec);
  // As wait_all, but a rank that is gone (died or left, as the control
  // channel says) without failing this call (its failure spares it, Spared)
  // is not waited for: the verdict round (collectives/verdict) needs only
  // the ranks still alive. Sleeps on the total, so a gone rank costs a
  // health slice per wake-up. Totalled counters only.
  void wait_present(Counter counter, uint64_t value, const WaitSpec& spec);

  // The latency path: after writing small_buffer(rank(), call), post_mail
  // makes it visible with the call's signature; wait_mail returns once every
  // rank has posted `call` (acquire), and throws CHORUS_ERR_MISMATCH naming
  // both ranks if one posted another signature.
  // `digest` is signature_digest(sig), computed once per call.
  // A wait whose deadline passes seals the awaited rank's word (kMailSealed)
  // before it fails, unless that rank posted meanwhile: a rank that finds
  // its word sealed fails its post, so no rank finishes a call from the
  // input of a rank that timed out in it (every rank needs every input).
  void post_mail(uint64_t call, uint64_t digest);
  void wait_mail(uint64_t call, const CallSignature& sig, uint64_t digest, const WaitSpec& spec);

  // Numbering shared by all ranks (all issue the same calls): the first
  // round / barrier / mail call a new call uses. Advances by
  // what it takes.
  uint64_t take_rounds(uint64_t count);
  uint64_t take_barrier();
  uint64_t take_mail_call();

 private:
  struct alignas(64) SharedCounter {
    std::atomic<uint64_t> value;
    std::atomic<uint32_t> sleepers;
  };
  struct alignas(64) Announcement {
    std::atomic<uint64_t> seq;  // 0 while sig is being written (a sequence lock)
    CallSignature sig;
  };
  // At the head of Small[r][p], 64-byte aligned; the input follows it.
  struct MailHeader {
    std::atomic<uint64_t> posted;  // mail call + 1 once its data and digest are in place
    uint64_t digest;               // signature_digest of the call
  };
  // posted | kMailSealed: a peer's deadline passed before this rank posted
  // that call: its post fails, and so does every wait on it.
  static constexpr uint64_t kMailSealed = uint64_t(1) << 63;
  static constexpr uint64_t sealed_mail(uint64_t call) { return (call + 1) | kMailSealed; }
  struct Control {
    SharedCounter counters[kCounterCount];
    Announcement announcement;
  };
  MailHeader& mail(int rank, uint64_t mail_call) const;
  Control& control(int rank) const;
  void check_announcement_of(int rank, const CallSignature& call) const;
  // Rank's announced call; false while it is being rewritten.
  bool read_announcement(int rank, CallSignature& out) const;
  Domain(const Options& options, Segment segment);
  SharedCounter& counter(int rank, Counter counter) const;
  SharedCounter& total(Counter counter) const;  // sum over ranks (see publish)
  int first_behind(Counter counter, uint64_t value, int from) const;
  // Rank r's step of `counter`, sealed or not.
  uint64_t step(int r, Counter counter) const;
  // A wait on `counter` reaching `value` whose deadline passed: seals the
  // counter of a rank still behind (but the `gone`), so that it cannot
  // reach the step, and throws the timeout; returns if every rank reached
  // it meanwhile.
  void seal_lagging(Counter counter, uint64_t value, const WaitSpec& spec,
                    const std::vector<char>* gone);
  // counter | kCounterSealed: a peer's deadline passed while this rank was
  // behind: its publish fails, and no rank's wait passes it.
  static constexpr uint64_t kCounterSealed = uint64_t(1) << 63;
  // Its `sleepers`: how many ranks sleep on some mail header (its poster wakes them).
  SharedCounter& mail_sleepers() const;
  // What a sleeping waiter watches: the word whose change wakes it, and the
  // count its poster checks before calling the kernel.
  struct Watch {
    const std::atomic<uint64_t>* word;
    std::atomic<uint32_t>* sleepers;
    int rank = -1;  // the (domain) rank whose post the wait awaits; -1: any of them
  };
  // Spins (spec), then sleeps on watch() until ready(); on every health slice
  // asks the control channel about peers and compares announcements; calls
  // timed_out() (which throws) at the deadline.
  template <typename Ready, typename WatchFn, typename TimedOut>
  void wait_until(Ready&& ready, WatchFn&& watch, const WaitSpec& spec, TimedOut&& timed_out);
  // The health slice's question about domain rank r: throws if it died,
  // aborted or left (check_peer), unless spec.gone is set and this call is
  // still spared: then marks it there.
  void check_peer(int r, const WaitSpec& spec) const;
  [[noreturn]] void throw_timeout(Counter counter, uint64_t value, const WaitSpec& spec) const;

  // The stuck-rank report: where each of these (job) ranks was, by its last
  // answer on the control channel ("rank 3 is still in allreduce #41, ... . ").
  std::string where_are(const std::vector<int>& ranks, const WaitSpec& spec) const;
  // The job rank of domain rank r (Options::job_ranks), for messages.
  int named(int r) const {
    return options_.job_ranks.empty() ? r : options_.job_ranks[static_cast<std::size_t>(r)];
  }

  int rank_;
  Layout layout_;
  Segment segment_;
  Options options_;
  uint64_t next_round_ = 0;
  uint64_t next_barrier_ = 0;
  uint64_t next_mail_ = 0;
  std::vector<Control*> controls_;  // per rank, in the segment (computed once)
  std::vector<std::byte*> mails_;   // Small[r][parity] at [2 r + parity]
};

// Out of line: collectives/team.hpp declares it without this header, so an
// inline definition would leave callers that do not include it unresolved.
const Layout& layout_of(const Domain& domain);

}  // namespace chorus::shm
