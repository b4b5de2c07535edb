// Shared-memory reduce: the allreduce pipeline (allreduce/shm.hpp,
// common/shm_pipeline.hpp) with only the root gathering.
//
// Terms: n ranks share a domain; a round covers n pieces of the buffer, piece
// j reduced by rank j. Steps per round: every rank stages the pieces the
// others reduce; rank j reduces piece j across all slots, in rank order, into
// its own slot (reading its own input in place); the root copies every
// reduced piece out. Bytes per rank: (n-1)/n B staged, B/n reduced from n
// inputs; the root copies B out. Nothing crosses a socket.
#include <algorithm>

#include "collectives/allreduce/shm.hpp"
#include "collectives/call.hpp"
#include "collectives/common/shm_pipeline.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {
namespace {

void run(CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
  shm_reduce(ctx, c.send, c.recv, c.count, c.dtype, c.op, c.root);
}

double shm_reduce_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  return shm_estimate_us(m, team, bytes, 1.0);
}

}  // namespace

extern const AlgorithmSpec shm_reduce_spec{
    CollectiveKind::reduce,
    "shm",
    "every rank reduces its share from the others' staged data; the root copies it all out",
    needs_shared_memory,
    shm_reduce_estimate,
    run,
    /*one_verdict=*/true};

}  // namespace chorus
