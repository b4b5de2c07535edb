#include "transports/call_board.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/core/deadline.hpp"
#include "transports/transport.hpp"

namespace chorus {

uint32_t CallBoard::space_of(uint32_t tag) {
  return tag >> Spared::kSpaceShift;
}

CallProgress CallBoard::Slot::load_relaxed() const {
  uint64_t w[kWords];
  for (std::size_t i = 0; i < kWords; ++i) w[i] = words_[i].load(std::memory_order_relaxed);
  CallProgress p;
  std::memcpy(static_cast<void*>(&p), w, sizeof p);
  return p;
}

void CallBoard::Slot::write(const CallProgress& p) {
  uint64_t w[kWords] = {};
  std::memcpy(w, static_cast<const void*>(&p), sizeof p);
  const uint64_t v = version_.load(std::memory_order_relaxed);
  version_.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (std::size_t i = 0; i < kWords; ++i) words_[i].store(w[i], std::memory_order_relaxed);
  version_.store(v + 2, std::memory_order_release);
}

CallProgress CallBoard::Slot::read() const {
  while (true) {
    const uint64_t before = version_.load(std::memory_order_acquire);
    if (before & 1) {  // a write of a few words is under way (its thread may be preempted)
      std::this_thread::yield();
      continue;
    }
    const CallProgress p = load_relaxed();
    std::atomic_thread_fence(std::memory_order_acquire);
    if (version_.load(std::memory_order_relaxed) == before) return p;
  }
}

void CallBoard::Slot::enter(const CallSignature& sig) {
  CallProgress p = load_relaxed();
  p.current = sig;
  p.waiting_on = -1;
  write(p);
}

void CallBoard::Slot::leave(const CallSignature& sig, bool finished) {
  CallProgress p = load_relaxed();
  if (p.current.seq == sig.seq) {
    p.current = CallSignature{};
    p.waiting_on = -1;
  }
  if (finished && sig.seq > p.finished.seq) p.finished = sig;
  write(p);
}

void CallBoard::Slot::waiting(const CallSignature& sig, int peer) {
  CallProgress p = load_relaxed();
  if (p.current.seq != sig.seq || p.waiting_on == peer) return;
  p.waiting_on = peer;
  write(p);
}

bool CallBoard::Slot::part_done(const CallSignature& sig) {
  uint64_t word = part_.load(std::memory_order_acquire);
  while (true) {
    const uint64_t done = word >> kSeqShift;
    if (word & kSealed) return sig.seq <= done;  // sealed: only what it vouched for
    if (sig.seq <= done) return true;
    if (part_.compare_exchange_weak(word, sig.seq << kSeqShift, std::memory_order_acq_rel))
      return true;
  }
}

bool CallBoard::Slot::long_since_part_done(std::chrono::milliseconds gap) {
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             Deadline::coarse_now().time_since_epoch())
                             .count();
  const int64_t last = part_done_ms_.load(std::memory_order_relaxed);
  part_done_ms_.store(now_ms, std::memory_order_relaxed);
  return now_ms - last >= gap.count();
}

uint64_t CallBoard::Slot::sealed_word(uint64_t word, chorus_result_t code) {
  if (word & kSealed) return word;  // the first sealer's code stays
  return word | kSealed | ((static_cast<uint64_t>(code) & kCodeMask) << kCodeShift);
}

chorus_result_t CallBoard::Slot::seal_code() const {
  const uint64_t word = part_.load(std::memory_order_acquire);
  if (!(word & kSealed)) return CHORUS_ERR_PEER_FAILURE;
  return static_cast<chorus_result_t>((word >> kCodeShift) & kCodeMask);
}

bool CallBoard::Slot::done_or_seal(uint64_t seq, chorus_result_t code) {
  uint64_t word = part_.load(std::memory_order_acquire);
  while (true) {
    if ((word >> kSeqShift) >= seq || read().finished.seq >= seq) return true;
    if (part_.compare_exchange_weak(word, sealed_word(word, code), std::memory_order_acq_rel))
      return false;
  }
}

uint64_t CallBoard::Slot::vouch(chorus_result_t code) {
  uint64_t word = part_.load(std::memory_order_acquire);
  while (!part_.compare_exchange_weak(word, sealed_word(word, code), std::memory_order_acq_rel)) {
  }
  // Finished without the verdict round (a small call) counts too: nothing
  // can change what that call did.
  return std::max(word >> kSeqShift, read().finished.seq);
}

void CallBoard::Slot::keep(const CallSignature& sig, std::span<const std::byte> result) {
  std::lock_guard lock(kept_mu_);
  Kept& k = kept_[sig.seq & 1];
  k.sig = sig;
  k.bytes.assign(result.begin(), result.end());  // the capacity stays: no allocation per call
}

bool CallBoard::Slot::kept(uint64_t seq, std::vector<std::byte>& out) const {
  return kept_call(seq, out).has_value();
}

std::optional<CallSignature> CallBoard::Slot::kept_call(uint64_t seq,
                                                        std::vector<std::byte>& out) const {
  std::lock_guard lock(kept_mu_);
  const Kept& k = kept_[seq & 1];
  if (seq == 0 || k.sig.seq != seq) return std::nullopt;
  out = k.bytes;
  return k.sig;
}

CallBoard::Slot& CallBoard::slot(uint32_t tag) {
  std::lock_guard lock(mu_);
  return own_[space_of(tag)];
}

void CallBoard::waiting(uint32_t tag, const CallSignature& sig, int peer) {
  Slot* s = nullptr;
  {
    std::lock_guard lock(mu_);
    auto it = own_.find(space_of(tag));
    if (it == own_.end()) return;
    s = &it->second;
  }
  s->waiting(sig, peer);
}

CallProgress CallBoard::progress(uint32_t tag) const {
  std::lock_guard lock(mu_);
  auto it = own_.find(space_of(tag));
  return it == own_.end() ? CallProgress{} : it->second.read();
}

Spared CallBoard::spared() const {
  std::lock_guard lock(mu_);
  Spared s;
  for (const auto& [space, slot] : own_) s.entries.push_back({space, slot.read().finished.seq});
  return s;
}

Spared CallBoard::started() const {
  std::lock_guard lock(mu_);
  Spared s;
  for (const auto& [space, slot] : own_) {
    const CallProgress p = slot.read();
    s.entries.push_back({space, std::max(p.current.seq, p.finished.seq)});
  }
  return s;
}

Spared CallBoard::vouch() {
  std::lock_guard lock(mu_);
  Spared s;
  for (auto& [space, slot] : own_) s.entries.push_back({space, slot.vouch()});
  return s;
}

std::vector<CallBoard::KeptResult> CallBoard::parting() {
  std::lock_guard lock(mu_);
  std::vector<KeptResult> out;
  for (auto& [space, slot] : own_) {
    const uint64_t done = slot.vouch();
    for (uint64_t seq = done; seq + 1 >= done && seq > 0; --seq) {  // the two latest
      KeptResult r{space, {}, {}};
      if (auto sig = slot.kept_call(seq, r.bytes)) {
        r.sig = *sig;
        out.push_back(std::move(r));
      }
    }
  }
  return out;
}

void CallBoard::heard(int peer, uint32_t tag, const CallProgress& progress) {
  std::lock_guard lock(mu_);
  reported_[{peer, space_of(tag)}] = Report{progress, Clock::now()};
}

std::optional<CallBoard::Report> CallBoard::report(int peer, uint32_t tag) const {
  std::lock_guard lock(mu_);
  auto it = reported_.find({peer, space_of(tag)});
  if (it == reported_.end()) return std::nullopt;
  return it->second;
}

std::string CallBoard::describe_peer(int peer, uint32_t tag, const CallSignature& mine) const {
  const std::optional<Report> r = report(peer, tag);
  if (!r) return fmt::format("rank {} did not report where it is", peer);
  const CallProgress& p = r->progress;
  std::string where;
  if (p.current.seq == mine.seq && p.current.seq != 0 && p.waiting_on >= 0)
    where = fmt::format("rank {} is in this call too (#{}), waiting on rank {}", peer, mine.seq,
                        p.waiting_on);
  else if (p.current.seq == mine.seq && p.current.seq != 0)
    where = fmt::format("rank {} is in this call too (#{})", peer, mine.seq);
  else if (p.current.seq != 0 && p.current.seq < mine.seq)
    where = fmt::format("rank {} is still in {}", peer, describe(p.current));
  else if (p.current.seq != 0)
    where = fmt::format("rank {} is already in {}", peer, describe(p.current));
  else if (p.finished.seq >= mine.seq && mine.seq != 0)
    where = fmt::format("rank {} has finished {}", peer, describe(p.finished));
  else if (p.finished.seq == 0)
    where = fmt::format("rank {} is in no call: it has not started one on this communicator", peer);
  else
    where = fmt::format("rank {} is in no call: the last it finished is {}", peer,
                        describe(p.finished));
  const auto age = std::chrono::duration<double>(Clock::now() - r->when).count();
  return fmt::format("{}, as of {:.2f} s ago", where, age);
}

}  // namespace chorus
