#include "transports/call_board.hpp"

#include <fmt/format.h>

#include "transports/transport.hpp"

namespace chorus {

uint32_t CallBoard::space_of(uint32_t tag) {
  return tag >> Spared::kSpaceShift;
}

void CallBoard::enter(uint32_t tag, const CallSignature& sig) {
  std::lock_guard lock(mu_);
  CallProgress& p = own_[space_of(tag)];
  p.current = sig;
  p.waiting_on = -1;
}

void CallBoard::leave(uint32_t tag, const CallSignature& sig, bool finished) {
  std::lock_guard lock(mu_);
  CallProgress& p = own_[space_of(tag)];
  if (p.current.seq == sig.seq) {
    p.current = CallSignature{};
    p.waiting_on = -1;
  }
  if (finished && sig.seq > p.finished.seq) p.finished = sig;
}

void CallBoard::waiting(uint32_t tag, const CallSignature& sig, int peer) {
  std::lock_guard lock(mu_);
  CallProgress& p = own_[space_of(tag)];
  if (p.current.seq == sig.seq) p.waiting_on = peer;
}

CallProgress CallBoard::progress(uint32_t tag) const {
  std::lock_guard lock(mu_);
  auto it = own_.find(space_of(tag));
  return it == own_.end() ? CallProgress{} : it->second;
}

Spared CallBoard::spared() const {
  std::lock_guard lock(mu_);
  Spared s;
  for (const auto& [space, p] : own_) s.entries.push_back({space, p.finished.seq});
  return s;
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
