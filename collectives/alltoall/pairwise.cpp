// Pairwise-exchange alltoall.
//
// Terms (patterns/tree.hpp): n ranks; block j of a rank's send buffer goes to
// rank j, landing at block (sender) of its receive buffer.
//
// Steps: n - 1 exchanges, all posted at once: every receive first (each
// straight into its block), then the sends in step order s = 1..n-1 to
// (r + s) mod n, so that at any moment the ranks send to different peers.
// The own block is copied locally.
//
// Bytes on the wire per rank: (n - 1) B sent and received (B = count * elem);
// n - 1 messages each way.
#include <cstring>
#include <vector>

#include "collectives/call.hpp"
#include "collectives/context.hpp"
#include "collectives/patterns/tree.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {
namespace {

void pairwise_alltoall(CollectiveContext& ctx, const CollectiveCall& c, const CallShape& shape) {
  const int n = ctx.size(), me = ctx.rank();
  const std::size_t block = c.count * shape.elem;
  const auto* in = static_cast<const std::byte*>(c.send);
  auto* out = static_cast<std::byte*>(c.recv);
  std::vector<RequestPtr> requests;
  for (int s = 1; s < n; ++s) {
    const int from = patterns::pairwise_recv_peer(me, n, s);
    requests.push_back(ctx.recv(from, {out + static_cast<std::size_t>(from) * block, block}));
  }
  for (int s = 1; s < n; ++s) {
    const int to = patterns::pairwise_send_peer(me, n, s);
    requests.push_back(ctx.send(to, {in + static_cast<std::size_t>(to) * block, block}));
  }
  if (block)
    std::memcpy(out + static_cast<std::size_t>(me) * block,
                in + static_cast<std::size_t>(me) * block, block);
  ctx.wait(requests);
}

double pairwise_alltoall_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  const double n = team.size();
  if (team.size() == 1) return 0;
  return (n - 1) * m.alpha(team.placement) +
         (n - 1) / n * static_cast<double>(bytes) * m.exchange_per_byte(team.placement);
}

}  // namespace

extern const AlgorithmSpec pairwise_alltoall_spec{
    CollectiveKind::alltoall,
    "pairwise",
    "n - 1 exchanges with (rank + s) and (rank - s), all in flight at once",
    runs_anywhere,
    pairwise_alltoall_estimate,
    pairwise_alltoall};

}  // namespace chorus
