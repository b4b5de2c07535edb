// The fusion engine's negotiation round (Engine::negotiate): which pending
// tensors every rank has, by the cached fast path (a MIN allreduce of a byte
// per known tensor) or the full exchange of every rank's pending list, and
// the verdicts a round can reach (a mismatch, a stall, a timeout, a peer
// shutting its engine down). The protocol's pure parts: negotiation.hpp.
#include <fmt/format.h>

#include <unordered_map>

#include "base/core/error.hpp"
#include "lib/fusion/engine.hpp"
#include "lib/fusion/engine_parts.hpp"

namespace chorus::fusion {
namespace {

std::string rank_names(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

}  // namespace

std::vector<FusedTensor*> Engine::negotiate(Stop& stop) {
  const auto start = Clock::now();
  bool has_new = false, stall = false, timed_out = false, shutting_down;
  std::vector<uint8_t> vec(kFlagCount + known_.size(), 0);
  // pending_'s index of each known id pending here (fast path), or -1.
  std::vector<int64_t> pending_of(known_.size(), -1);
  const auto stall_after = seconds(options_.stall_s), timeout_after = seconds(options_.timeout_s);
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    FusedTensor& t = *pending_[i];
    t.ready_index = -1;
    const int64_t id = t.slot->known_id;  // written by cycles only, as this one
    t.known_id = id >= 0 && known_.at(static_cast<uint32_t>(id)).same_shape(t.shape) ? id : -1;
    if (t.known_id >= 0) {
      vec[kFlagCount + static_cast<std::size_t>(t.known_id)] = kPending;
      pending_of[static_cast<std::size_t>(t.known_id)] = static_cast<int64_t>(i);
    } else {
      has_new = true;
    }
    const auto age = start - t.submitted;
    if (age > stall_after && start - last_stall_warning_ > stall_after) stall = true;
    if (age > timeout_after) timed_out = true;
  }
  // Known tensors that lie right after the one of the id before: where every
  // rank says so, a bucket may extend over them with no copy anywhere.
  for (std::size_t id = 1; id < pending_of.size(); ++id)
    if (pending_of[id] >= 0 && pending_of[id - 1] >= 0 &&
        lies_after(*pending_[static_cast<std::size_t>(pending_of[id - 1])],
                   *pending_[static_cast<std::size_t>(pending_of[id])]))
      vec[kFlagCount + id] = kPendingAfterPrevious;
  {
    std::lock_guard lock(mu_);
    shutting_down = shutdown_requested_;
  }
  const bool raised[kFlagCount] = {has_new, stall, timed_out, shutting_down};
  uint32_t flags = 0;
  for (std::size_t f = 0; f < kFlagCount; ++f) {
    vec[f] = raised[f] ? 0 : 1;
    flags |= raised[f] ? 1u << f : 0u;
  }
  comm_->run(
      allreduce_call({vec.size(), DataType::u8, ReduceOp::min}, vec.data(), vec.data(), vec.size()),
      deadline());

  const bool slow = !vec[kHasNew] || !vec[kStallCheck] || !vec[kTimedOut] || !vec[kShutdown];
  std::vector<FusedTensor*> ready;
  if (!slow) {
    ready.reserve(pending_.size());
    for (std::size_t id = 0; id < known_.size(); ++id)
      if (const uint8_t agreed = vec[kFlagCount + id]; agreed != kNotPending) {
        CHORUS_CHECK(pending_of[id] >= 0,
                     "known tensor '{}' is ready everywhere but not pending "
                     "on rank {}",
                     known_.at(static_cast<uint32_t>(id)).name, rank_);
        FusedTensor* t = pending_[static_cast<std::size_t>(pending_of[id])].get();
        // Only where the tensor of id - 1 is ready everywhere too (every
        // rank saying so had it pending): it comes right before in `ready`.
        t->follows = agreed == kPendingAfterPrevious;
        ready.push_back(t);
      }
    {
      std::lock_guard lock(mu_);
      ++stats_.cycles;
      ++stats_.fast_cycles;
    }
    if (timed_)  // the arguments alone cost allocations on every cycle
      timeline_.span(0, "negotiate", start, Clock::now(),
                     {{"path", "fast"}, {"ready", ready.size()}});
    return ready;
  }

  // The full exchange: every rank's pending list.
  RankReport mine{flags, {}};
  for (const auto& t : pending_) mine.pending.push_back(t->spec());
  const std::vector<uint8_t> bytes = encode_report(mine);
  std::vector<std::size_t> sizes(static_cast<std::size_t>(size_));
  const uint64_t my_size = bytes.size();
  CollectiveCall sizes_call;
  sizes_call.kind = CollectiveKind::allgather;
  sizes_call.send = &my_size;
  sizes_call.recv = sizes.data();
  sizes_call.count = 1;
  sizes_call.dtype = DataType::u64;
  static_assert(sizeof(std::size_t) == sizeof(uint64_t));
  comm_->run(sizes_call, deadline());
  std::size_t total = 0;
  for (auto s : sizes) total += s;
  std::vector<uint8_t> all(total);
  CollectiveCall lists;
  lists.kind = CollectiveKind::allgatherv;
  lists.send = bytes.data();
  lists.recv = all.data();
  lists.counts = sizes.data();
  lists.dtype = DataType::u8;
  comm_->run(lists, deadline());
  std::vector<RankReport> reports;
  std::size_t at = 0;
  for (auto s : sizes) {
    reports.push_back(decode_report({all.data() + at, s}));
    at += s;
  }
  Agreement agreement = agree(reports);
  {
    std::lock_guard lock(mu_);
    ++stats_.cycles;
    ++stats_.slow_cycles;
  }
  if (timed_)
    timeline_.span(0, "negotiate", start, Clock::now(),
                   {{"path", "full"}, {"ready", agreement.ready.size()}});

  if (agreement.mismatch) {
    stop = {io_error(CHORUS_ERR_MISMATCH, "fused allreduce: " + describe(*agreement.mismatch)),
            true};
    return {};
  }
  auto listed = [&](const std::string& lead) {
    std::string text = lead;
    for (std::size_t i = 0; i < agreement.missing.size() && i < kMaxListed; ++i)
      text += (i ? "; " : "") + describe(agreement.missing[i]);
    if (agreement.missing.size() > kMaxListed)
      text += fmt::format("; and {} more", agreement.missing.size() - kMaxListed);
    return text;
  };
  std::vector<int> timed_out_ranks, stopping_ranks;
  bool stall_round = false;
  for (int r = 0; r < size_; ++r) {
    const auto& report = reports[static_cast<std::size_t>(r)];
    if (report.has(kTimedOut)) timed_out_ranks.push_back(r);
    if (report.has(kShutdown)) stopping_ranks.push_back(r);
    stall_round = stall_round || report.has(kStallCheck);
  }
  if (!timed_out_ranks.empty() && !agreement.missing.empty()) {
    stop = {io_error(CHORUS_ERR_TIMEOUT,
                     listed(fmt::format("fused allreduce: not every rank submitted its tensors "
                                        "within CHORUS_TIMEOUT ({} s): ",
                                        options_.timeout_s))),
            true};
    return {};
  }
  if (stall_round) {
    last_stall_warning_ = start;
    if (!agreement.missing.empty())
      fusion_log().warn(
          "rank {}: fusion stall: {}", rank_,
          listed(fmt::format("for more than {} s (CHORUS_FUSION_STALL_S), ", options_.stall_s)));
  }
  if (!stopping_ranks.empty()) {
    const std::string lead =
        fmt::format("fused allreduce: {} shut down the fusion engine (destroyed the communicator)",
                    rank_names(stopping_ranks));
    stop = {io_error(CHORUS_ERR_PEER_FAILURE,
                     agreement.missing.empty() ? lead : listed(lead + " while ")),
            !agreement.missing.empty()};
  }
  std::unordered_map<std::string_view, FusedTensor*> pending_by_name;
  for (const auto& t : pending_) pending_by_name.emplace(t->name(), t.get());
  for (const auto& spec : agreement.ready) {
    auto it = pending_by_name.find(spec.name);
    CHORUS_CHECK(it != pending_by_name.end(), "ready tensor '{}' is not pending on rank {}",
                 spec.name, rank_);
    it->second->follows = false;  // the full exchange does not compare layouts
    ready.push_back(it->second);
  }
  return ready;
}

}  // namespace chorus::fusion
