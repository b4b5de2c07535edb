#include "collectives/shm/domain.hpp"

#include <fmt/format.h>

#include <cstring>
#include <random>
#include <vector>

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

}  // namespace chorus::shm
