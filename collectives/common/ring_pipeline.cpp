#include "collectives/common/ring_pipeline.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/core/error.hpp"

namespace chorus {

using patterns::Range;

namespace {

// Receives posted ahead of the one being processed (when not forwarding from
// staging): enough to keep the link busy while a segment is reduced.
constexpr std::size_t kPipelineWindow = 4;

struct Slot {
  RequestPtr recv;
  RequestPtr forward;  // send reading from this staging segment
  int step = 0;
  int chunk = 0;
  Range seg;
  std::byte* data = nullptr;
};

}  // namespace

void run_ring_pipeline(CollectiveContext& ctx, const RingPipeline& p) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  CHORUS_CHECK(p.chunks.size() == static_cast<std::size_t>(n), "{} chunks for {} ranks",
               p.chunks.size(), n);
  CHORUS_CHECK(p.first_chunk >= 0 && p.first_chunk < n, "first chunk {}", p.first_chunk);
  if (n == 1) return;
  const int right = patterns::ring_right(rank, n);
  const int left = patterns::ring_left(rank, n);
  const std::size_t e = p.elem_size;
  const std::size_t seg_elems = patterns::segment_elems(ctx.segment_bytes, e);
  auto recv_chunk = [&](int step) { return patterns::mod(p.first_chunk - step - 1, n); };

  // The receive stream: steps 0..n-2, each the segments of chunk recv_chunk(step).
  std::size_t total = 0, max_segs = 0, max_seg_elems = 0;
  for (int s = 0; s < n - 1; ++s) {
    const Range c = p.chunks[static_cast<std::size_t>(recv_chunk(s))];
    const std::size_t k = patterns::segment_count(c.count, seg_elems);
    total += k;
    max_segs = std::max(max_segs, k);
    max_seg_elems = std::max(max_seg_elems, std::min(seg_elems, c.count));
  }
  const std::size_t window = p.forwards_staging ? max_segs + kPipelineWindow : kPipelineWindow;
  const std::size_t slots = std::min(window, total);
  const std::size_t slot_bytes = max_seg_elems * e;
  std::byte* staging = nullptr;
  if (!p.direct_recv && !p.recv_placed)
    staging = ctx.scratch.get(p.staging_slot, slots * slot_bytes).data();
  const std::byte* staging_end = staging + slots * slot_bytes;

  std::vector<Slot> ring(slots);
  std::vector<RequestPtr> sends;
  std::size_t checked = 0;  // sends[0, checked) are known to have succeeded
  auto check_sends = [&] {
    while (checked < sends.size() && sends[checked]->done())
      sends[checked++]->completion().rethrow_if_failed();
  };

  // Posts receives in stream order, up to `slots` ahead of `consumed`. A slot
  // whose forwarding send is still in flight stops the posting, unless the
  // segment is needed right now; then the send is waited for.
  std::size_t posted = 0;
  int post_step = 0;
  std::size_t post_index = 0;
  auto post = [&](std::size_t consumed) {
    while (posted < total && posted < consumed + slots) {
      Slot& sl = ring[posted % slots];
      if (sl.forward) {
        if (!sl.forward->done() && posted > consumed) break;
        wait_request(ctx, sl.forward);
        sl.forward.reset();
      }
      const int chunk = recv_chunk(post_step);
      const Range c = p.chunks[static_cast<std::size_t>(chunk)];
      sl.step = post_step;
      sl.chunk = chunk;
      sl.seg = patterns::segment(c, seg_elems, post_index);
      if (p.recv_placed) {
        sl.data = nullptr;
        sl.recv = p.recv_placed(sl.seg);
      } else {
        sl.data = p.direct_recv ? p.direct_recv + sl.seg.offset * e
                                : staging + (posted % slots) * slot_bytes;
        sl.recv = ctx.recv(left, {sl.data, sl.seg.count * e});
      }
      if (++post_index == patterns::segment_count(c.count, seg_elems)) {
        ++post_step;
        post_index = 0;
      }
      ++posted;
    }
  };

  post(0);
  const Range first = p.chunks[static_cast<std::size_t>(p.first_chunk)];
  const std::size_t first_segs = patterns::segment_count(first.count, seg_elems);
  sends.reserve(first_segs + total);
  for (std::size_t k = 0; k < first_segs; ++k) {
    const Range sg = patterns::segment(first, seg_elems, k);
    sends.push_back(p.send_first ? p.send_first(sg)
                                 : ctx.send(right, {p.first_src + sg.offset * e, sg.count * e}));
  }

  for (std::size_t j = 0; j < total; ++j) {
    post(j);
    Slot& sl = ring[j % slots];
    wait_request(ctx, sl.recv);
    sl.recv.reset();
    const std::byte* fwd = p.consume ? p.consume(sl.step, sl.chunk, sl.seg, sl.data) : sl.data;
    if (sl.step < n - 2) {
      RequestPtr req =
          p.forward_placed ? p.forward_placed(sl.seg) : ctx.send(right, {fwd, sl.seg.count * e});
      const auto at = reinterpret_cast<std::uintptr_t>(fwd);
      if (p.forwards_staging && sl.seg.count > 0 &&
          at >= reinterpret_cast<std::uintptr_t>(staging) &&
          at < reinterpret_cast<std::uintptr_t>(staging_end))
        sl.forward = req;
      sends.push_back(std::move(req));
    }
    check_sends();
  }
  ctx.wait(std::span<const RequestPtr>(sends).subspan(checked));
}

}  // namespace chorus
