// The segment pipeline shared by ring reduce-scatter and ring allgather.
//
// Both are n - 1 steps in which rank r sends chunk send(s) to the right and
// receives chunk recv(s) from the left, with recv(s) == send(s + 1): what
// arrives at step s is processed (reduced, or just kept) and forwarded at step
// s + 1. Each chunk is cut into segments of at most ctx.segment_bytes (see
// patterns::segment), and the pipeline runs on the stream of segments, not on
// whole steps: segment k is forwarded as soon as it is processed, while
// segment k + 1 is still on the wire. Chunk sizes may differ (balanced
// chunks); both sides derive the same segments from the same chunk layout.
//
// Receives: at most `window` are posted ahead, in stream order, before the
// sends that could match them. They land either straight in the destination
// (direct_recv) or in a ring of `window` staging segments from the scratch
// pool. Sends are non-blocking and all waited for before returning; a failed
// send is reported as soon as it is seen.
//
// Forwarding from staging (reduce-scatter into a buffer it does not own): a
// staging segment is reused only after the send forwarding from it has
// completed, and the window is then more than a chunk's segments so that no
// cycle of ranks can wait on each other's staging (a send completes only once
// the right neighbour posts its receive).
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "collectives/context.hpp"
#include "collectives/patterns/ring.hpp"

namespace chorus {

struct RingPipeline {
  std::span<const patterns::Range> chunks;  // size() == ctx.size(); element ranges
  std::size_t elem_size = 1;
  int first_chunk = 0;  // chunk sent at step 0; step s receives first_chunk - s - 1
  const std::byte* first_src = nullptr;  // step 0 sends read first_src + offset * elem_size
  // If set, sends each segment of step 0 instead (its element range): a
  // buffer in parts (collectives/scattered.hpp) sends from where they lie.
  std::function<RequestPtr(patterns::Range seg)> send_first;
  std::byte* direct_recv = nullptr;  // if set, segments land at direct_recv + offset * elem_size
  // If set, receives each segment into place itself (a scatter receive into
  // a buffer in parts): no staging, consume (if any) gets null data, and
  // forward_placed forwards it.
  std::function<RequestPtr(patterns::Range seg)> recv_placed;
  std::function<RequestPtr(patterns::Range seg)> forward_placed;
  int staging_slot = 0;           // else in this scratch slot
  bool forwards_staging = false;  // consume() may return pointers into staging
  // Called once per received segment, in stream order, with its step, chunk,
  // absolute element range and data; returns where to forward it from at the
  // next step (ignored at the last step). Unset: forwarded as it arrived.
  std::function<const std::byte*(int step, int chunk, patterns::Range seg, std::byte* data)>
      consume;
};

void run_ring_pipeline(CollectiveContext& ctx, const RingPipeline& pipeline);

// ctx.wait, skipping the wait bookkeeping for a request that is already done.
inline void wait_request(CollectiveContext& ctx, const RequestPtr& r) {
  if (r->done())
    r->completion().rethrow_if_failed();
  else
    ctx.wait(r);
}

}  // namespace chorus
