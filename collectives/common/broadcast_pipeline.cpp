#include "collectives/common/broadcast_pipeline.hpp"

#include <array>

#include "collectives/common/ring_pipeline.hpp"
#include "collectives/patterns/ring.hpp"

namespace chorus {

namespace {
constexpr std::size_t kWindow = 4;  // receives posted ahead
}

void run_broadcast_pipeline(CollectiveContext& ctx, void* buf, std::size_t count,
                            std::size_t elem_size, const BroadcastTree& tree) {
  const std::size_t e = elem_size;
  const patterns::Range whole{0, count};
  const std::size_t seg_elems = patterns::segment_elems(ctx.segment_bytes, e);
  const std::size_t segs = patterns::segment_count(count, seg_elems);
  auto* b = static_cast<std::byte*>(buf);
  auto bytes_of = [&](std::size_t k) {
    const patterns::Range sg = patterns::segment(whole, seg_elems, k);
    return std::span<std::byte>(b + sg.offset * e, sg.count * e);
  };

  std::vector<RequestPtr> awaited;
  for (int r : tree.awaits) awaited.push_back(ctx.await_confirmation(r));
  std::vector<RequestPtr> sends;
  sends.reserve(tree.children.size() * segs);
  std::size_t checked = 0;  // sends[0, checked) are known to have succeeded
  auto forward = [&](std::size_t k) {
    for (int child : tree.children) sends.push_back(ctx.send(child, bytes_of(k)));
  };
  if (tree.parent < 0) {
    for (std::size_t k = 0; k < segs; ++k) forward(k);
  } else {
    std::array<RequestPtr, kWindow> recvs;
    std::size_t posted = 0;
    for (; posted < segs && posted < kWindow; ++posted)
      recvs[posted % kWindow] = ctx.recv(tree.parent, bytes_of(posted));
    for (std::size_t k = 0; k < segs; ++k) {
      RequestPtr& r = recvs[k % kWindow];
      wait_request(ctx, r);
      r.reset();
      if (posted < segs) {
        recvs[posted % kWindow] = ctx.recv(tree.parent, bytes_of(posted));
        ++posted;
      }
      forward(k);
      while (checked < sends.size() && sends[checked]->done())
        sends[checked++]->completion().rethrow_if_failed();
    }
  }
  ctx.wait(std::span<const RequestPtr>(sends).subspan(checked));
  ctx.wait(awaited);
  // A rank that confirms and awaits no release after it is the releaser
  // (the tree's root, the chain's end): its confirmations commit the call.
  if (tree.released_by < 0 && !tree.confirms.empty()) ctx.commit();
  std::vector<RequestPtr> closing;
  for (int r : tree.confirms) closing.push_back(ctx.confirm(r));
  // Posted only now: from the root's children's view the release follows
  // the segments from the same rank, and receives match in posting order.
  if (tree.released_by >= 0) closing.push_back(ctx.await_confirmation(tree.released_by));
  ctx.wait(closing);
}

}  // namespace chorus
