#include "collectives/broadcast/ring.hpp"

#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/cost_model.hpp"

#include <array>
#include <vector>

#include "base/core/log.hpp"
#include "collectives/common/ring_pipeline.hpp"
#include "collectives/patterns/ring.hpp"

namespace chorus {

namespace {
constexpr std::size_t kWindow = 4;  // receives posted ahead
}

void ring_broadcast(CollectiveContext& ctx, void* buf, std::size_t count, DataType dtype,
                    int root) {
  static spdlog::logger& log = logger("coll");
  const int n = ctx.size();
  const std::size_t e = dtype_size(dtype);
  log.debug("ring broadcast: {} ranks, count {} ({}), root {}, segment {} bytes", n, count,
            dtype_name(dtype), root, ctx.segment_bytes);
  if (n == 1) return;

  const patterns::ChainPosition pos = patterns::chain_position(ctx.rank(), n, root);
  const patterns::Range whole{0, count};
  const std::size_t seg_elems = patterns::segment_elems(ctx.segment_bytes, e);
  const std::size_t segs = patterns::segment_count(count, seg_elems);
  auto* b = static_cast<std::byte*>(buf);
  auto bytes_of = [&](std::size_t k) {
    const patterns::Range sg = patterns::segment(whole, seg_elems, k);
    return std::span<std::byte>(b + sg.offset * e, sg.count * e);
  };

  const int last = (root + n - 1) % n;  // the chain's end, which confirms
  std::vector<RequestPtr> sends;
  sends.reserve(pos.child >= 0 ? segs + 1 : 1);
  if (pos.parent < 0) {
    sends.push_back(ctx.await_confirmation(last));
    for (std::size_t k = 0; k < segs; ++k) sends.push_back(ctx.send(pos.child, bytes_of(k)));
    ctx.wait(sends);
    return;
  }

  std::array<RequestPtr, kWindow> recvs;
  std::size_t posted = 0;
  for (; posted < segs && posted < kWindow; ++posted)
    recvs[posted % kWindow] = ctx.recv(pos.parent, bytes_of(posted));
  std::size_t checked = 0;
  for (std::size_t k = 0; k < segs; ++k) {
    RequestPtr& r = recvs[k % kWindow];
    wait_request(ctx, r);
    r.reset();
    if (posted < segs) {
      recvs[posted % kWindow] = ctx.recv(pos.parent, bytes_of(posted));
      ++posted;
    }
    if (pos.child >= 0) sends.push_back(ctx.send(pos.child, bytes_of(k)));
    while (checked < sends.size() && sends[checked]->done())
      sends[checked++]->completion().rethrow_if_failed();
  }
  if (ctx.rank() == last) sends.push_back(ctx.confirm(root));
  ctx.wait(std::span<const RequestPtr>(sends).subspan(checked));
}

// A pipelined chain: n - 1 hops, the buffer crossing each link once, and the
// confirmation's hop back to the root.
double ring_broadcast_estimate(const CostModel& m, const Team& team, std::size_t bytes) {
  if (team.size() == 1) return 0;
  return team.size() * m.alpha(team.placement) +
         static_cast<double>(bytes) * m.ring_per_byte(team.placement);
}

extern const AlgorithmSpec ring_broadcast_spec{
    CollectiveKind::broadcast,
    "ring",
    "a pipelined chain from the root: each segment forwarded as soon as it arrives",
    runs_anywhere,
    ring_broadcast_estimate,
    [](CollectiveContext& ctx, const CollectiveCall& c, const CallShape&) {
      ring_broadcast(ctx, c.recv, c.count, c.dtype, c.root);
    }};

}  // namespace chorus
