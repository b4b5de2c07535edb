// Linear gather: every rank sends its block straight to the root.
//
// Steps: one. The root posts a receive per rank straight into place (and
// copies its own block unless in place); the others send, and return once
// the root confirms (a zero-byte message after it has every block): a rank
// that only sent could not know that the root took part in the same call.
//
// Bytes on the wire: B per rank but the root; the root receives (n - 1) B,
// which bounds any gather (a tree would forward the same bytes through more
// links).
#include <cstring>
#include <vector>

#include "collectives/call.hpp"
#include "collectives/context.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {
namespace {

void linear_gather(CollectiveContext& ctx, const CollectiveCall& c, const CallShape& shape) {
  const int n = ctx.size(), me = ctx.rank();
  const std::size_t block = c.count * shape.elem;
  const auto* in = static_cast<const std::byte*>(c.send);
  if (me != c.root) {
    const RequestPtr both[] = {ctx.await_confirmation(c.root), ctx.send(c.root, {in, block})};
    ctx.wait(both);
    return;
  }
  auto* out = static_cast<std::byte*>(c.recv);
  std::vector<RequestPtr> receives;
  for (int r = 0; r < n; ++r)
    if (r != me)
      receives.push_back(ctx.recv(r, {out + static_cast<std::size_t>(r) * block, block}));
  std::byte* mine = out + static_cast<std::size_t>(me) * block;
  if (block && mine != in) std::memcpy(mine, in, block);
  ctx.wait(receives);
  ctx.confirm_to_all();
}

double linear_gather_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  const double n = team.size();
  if (team.size() == 1) return 0;
  return 2 * m.alpha(team.placement) +
         (n - 1) / n * static_cast<double>(bytes) * m.per_byte(team.placement, 1);
}

}  // namespace

extern const AlgorithmSpec linear_gather_spec{CollectiveKind::gather,
                                              "linear",
                                              "every rank sends its block straight to the root",
                                              runs_anywhere,
                                              linear_gather_estimate,
                                              linear_gather,
                                              /*one_verdict=*/true,
                                              /*commit_point=*/true};

}  // namespace chorus
