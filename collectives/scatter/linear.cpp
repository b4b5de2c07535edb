// Linear scatter: the root sends every block straight to its rank.
//
// Steps: one, then two zero-byte ones. The root posts a send per rank (and
// copies its own block unless in place); the others receive straight into
// their buffer and confirm to the root. Once every confirmation has come,
// the root confirms to every other rank (the release), and they return only
// after it: a root that only sent could not know that the others took part
// in the same call, and a rank that returned with its own block would
// succeed where another failed, left or called something else.
//
// Bytes on the wire: the root sends (n - 1) B, each other rank receives B.
#include <cstring>
#include <vector>

#include "collectives/call.hpp"
#include "collectives/context.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {
namespace {

void linear_scatter(CollectiveContext& ctx, const CollectiveCall& c, const CallShape& shape) {
  const int n = ctx.size(), me = ctx.rank();
  const std::size_t block = c.count * shape.elem;
  auto* out = static_cast<std::byte*>(c.recv);
  if (me != c.root) {
    ctx.wait(ctx.recv(c.root, {out, block}));
    const RequestPtr closing[] = {ctx.confirm(c.root), ctx.await_confirmation(c.root)};
    ctx.wait(closing);
    return;
  }
  const auto* in = static_cast<const std::byte*>(c.send);
  std::vector<RequestPtr> sends;
  for (int r = 0; r < n; ++r)
    if (r != me) {
      sends.push_back(ctx.await_confirmation(r));
      sends.push_back(ctx.send(r, {in + static_cast<std::size_t>(r) * block, block}));
    }
  const std::byte* mine = in + static_cast<std::size_t>(me) * block;
  if (block && mine != out) std::memcpy(out, mine, block);
  ctx.wait(sends);
  ctx.confirm_to_all();
}

double linear_scatter_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  const double n = team.size();
  if (team.size() == 1) return 0;
  return 3 * m.alpha(team.placement) +
         (n - 1) / n * static_cast<double>(bytes) * m.per_byte(team.placement, 1);
}

}  // namespace

extern const AlgorithmSpec linear_scatter_spec{CollectiveKind::scatter,
                                               "linear",
                                               "the root sends every block straight to its rank",
                                               runs_anywhere,
                                               linear_scatter_estimate,
                                               linear_scatter,
                                               /*one_verdict=*/true,
                                               /*commit_point=*/true};

}  // namespace chorus
