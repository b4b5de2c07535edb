// Shared-memory alltoall and scatter: an exchange through the senders' slots.
//
// Terms: n ranks share a domain; P = its piece size; block j of a sender's
// buffer (B bytes) goes to rank j.
//
// Steps per round b (common/shm_pipeline.hpp): every sender stages bytes
// [b P, (b + 1) P) of each of its blocks, block j at piece j of its slot;
// then rank j copies piece j out of every sender's slot into the sender's
// block of its output. Alltoall: every rank sends; scatter: the root alone.
// Bytes per rank: n B staged and n B copied out (alltoall); B copied out
// (scatter). Nothing crosses a socket.
#include <algorithm>
#include <cstring>

#include "collectives/call.hpp"
#include "collectives/common/shm_pipeline.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {
namespace {

class ExchangePlan final : public ShmPlan {
 public:
  // root < 0: every rank sends (alltoall); else only `root` does (scatter),
  // and each rank receives one block.
  ExchangePlan(const std::byte* in, std::byte* out, std::size_t block, int ranks, int me, int root,
               std::size_t piece)
      : in_(in), out_(out), block_(block), ranks_(ranks), me_(me), root_(root), piece_(piece) {}

  std::size_t output_bytes() const override {
    return root_ < 0 ? block_ * static_cast<std::size_t>(ranks_) : block_;
  }
  uint64_t rounds() const override { return (block_ + piece_ - 1) / piece_; }
  void stage(uint64_t b, std::vector<ShmStage>& out) const override {
    if (root_ >= 0 && me_ != root_) return;
    for (int j = 0; j < ranks_; ++j)
      if (j != me_)
        out.push_back({in_ + static_cast<std::size_t>(j) * block_ + b * piece_,
                       static_cast<std::size_t>(j) * piece_, length(b)});
  }
  void gather(uint64_t b, std::vector<ShmGather>& out) const override {
    const std::size_t at = static_cast<std::size_t>(me_) * piece_;
    if (root_ >= 0) {
      if (me_ != root_) out.push_back({root_, at, out_ + b * piece_, length(b)});
      return;
    }
    for (int j = 0; j < ranks_; ++j)
      if (j != me_)
        out.push_back({j, at, out_ + static_cast<std::size_t>(j) * block_ + b * piece_, length(b)});
  }

 private:
  std::size_t length(uint64_t b) const { return std::min(piece_, block_ - b * piece_); }

  const std::byte* in_;
  std::byte* out_;
  std::size_t block_;
  int ranks_, me_, root_;
  std::size_t piece_;
};

void exchange(CollectiveContext& ctx, const CollectiveCall& c, const CallShape& shape, int root) {
  const int n = ctx.shm->size(), me = ctx.shm->rank();
  const std::size_t block = c.count * shape.elem;
  const auto* in = static_cast<const std::byte*>(c.send);
  auto* out = static_cast<std::byte*>(c.recv);
  // The block a rank keeps for itself is copied locally.
  if (block && (root < 0 || me == root)) {
    const std::byte* own = in + static_cast<std::size_t>(me) * block;
    std::byte* dst = root < 0 ? out + static_cast<std::size_t>(me) * block : out;
    if (own != dst) std::memcpy(dst, own, block);
  }
  if (n == 1) return;
  ExchangePlan plan(in, out, block, n, me, root, ctx.shm->layout().base_piece());
  run_shm_pipeline(ctx, plan, c.dtype, ReduceOp::sum);
}

double shm_exchange_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  return shm_estimate_us(m, team, bytes, 0.0);
}

}  // namespace

extern const AlgorithmSpec shm_alltoall_spec{
    CollectiveKind::alltoall,
    "shm",
    "every rank stages its blocks once; each copies its own block from every slot",
    needs_shared_memory,
    shm_exchange_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape& shape) {
      exchange(ctx, c, shape, -1);
    },
    /*one_verdict=*/true};

extern const AlgorithmSpec shm_scatter_spec{
    CollectiveKind::scatter,
    "shm",
    "the root stages every block once; each rank copies its own out",
    needs_shared_memory,
    shm_exchange_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape& shape) {
      exchange(ctx, c, shape, c.root);
    },
    /*one_verdict=*/true};

}  // namespace chorus
