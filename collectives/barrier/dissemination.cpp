#include "collectives/barrier/dissemination.hpp"

#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include <array>

#include "base/core/log.hpp"
#include "collectives/patterns/ring.hpp"

namespace chorus {

void dissemination_barrier(CollectiveContext& ctx) {
  static spdlog::logger& log = logger("coll");
  const int n = ctx.size();
  const int rank = ctx.rank();
  const int rounds = patterns::dissemination_rounds(n);
  log.debug("dissemination barrier: {} ranks, {} rounds", n, rounds);
  for (int k = 0; k < rounds; ++k) {
    std::array<RequestPtr, 2> reqs;
    reqs[0] = ctx.recv(patterns::dissemination_recv_peer(rank, n, k), {});
    reqs[1] = ctx.send(patterns::dissemination_send_peer(rank, n, k), {});
    ctx.wait(reqs);
  }
}

double dissemination_estimate(const CostModel& m, const Team& team, std::size_t) {
  return log2_ceil(team.size()) * m.alpha(team.placement);
}

extern const AlgorithmSpec dissemination_barrier_spec{
    CollectiveKind::barrier,
    "dissemination",
    "ceil(log2 n) rounds of zero-byte messages to rank + 2^k",
    runs_anywhere,
    dissemination_estimate,
    [](CollectiveContext& ctx, const CollectiveCall&, const CallShape&) {
      dissemination_barrier(ctx);
    }};

}  // namespace chorus
