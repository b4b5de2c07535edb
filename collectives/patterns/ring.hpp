// Pure rank arithmetic of the ring family (ring reduce-scatter / allgather /
// allreduce, chain broadcast) and of the dissemination barrier. No transport,
// no memory: every function here is a formula, unit-tested on its own.
//
// Terms:
//   n        number of ranks, ranks 0..n-1
//   right    the rank a ring step sends to: (r + 1) mod n
//   left     the rank a ring step receives from: (r - 1) mod n
//   chunk    one of n contiguous element ranges a buffer is split into; chunk c
//            is "owned" by rank c at the end of a reduce-scatter
//   segment  a piece of a chunk of at most segment_bytes; the unit of one
//            message, so that sending segment k+1 overlaps reducing segment k
#pragma once

#include <cstddef>
#include <vector>

namespace chorus::patterns {

// A range of elements [offset, offset + count).
struct Range {
  std::size_t offset = 0;
  std::size_t count = 0;

  std::size_t end() const { return offset + count; }
  bool operator==(const Range&) const = default;
};

// a mod n in [0, n), for any sign of a; n > 0.
inline int mod(int a, int n) {
  int m = a % n;
  return m < 0 ? m + n : m;
}

inline int ring_right(int rank, int size) {
  return mod(rank + 1, size);
}
inline int ring_left(int rank, int size) {
  return mod(rank - 1, size);
}

// Balanced partition of `count` elements into `parts` chunks: the first
// count % parts chunks get one element more than the others. Chunks are
// contiguous, in order, and cover [0, count) exactly (some may be empty).
Range chunk(std::size_t count, int parts, int index);
std::vector<Range> balanced_chunks(std::size_t count, int parts);
// `parts` chunks of exactly `per_part` elements each (reduce_scatter/allgather).
std::vector<Range> equal_chunks(std::size_t per_part, int parts);

// Elements per segment: segment_bytes / elem_size, at least 1.
std::size_t segment_elems(std::size_t segment_bytes, std::size_t elem_size);
// Number of segments of a range of `count` elements: ceil(count / seg_elems),
// and 1 for an empty range (one empty message keeps both sides of a step in
// agreement and carries the call signature, so a mismatch is always seen).
std::size_t segment_count(std::size_t count, std::size_t seg_elems);
// Segment `index` of `range`: absolute element offsets, all but the last full.
Range segment(Range range, std::size_t seg_elems, std::size_t index);

// Ring allreduce in rounds: a call of at least kRingRoundsFrom rounds of
// round_bytes runs as consecutive ring allreduces of the returned number of
// elements each (the last one shorter), so that each round's data is still
// in cache when its allgather reads what its reduce-scatter wrote and when
// the kernel copies it through a loopback socket. Returns `count` (one
// round: the whole call) when round_bytes is 0 or the call is smaller.
inline constexpr std::size_t kRingRoundsFrom = 8;
std::size_t ring_round_elems(std::size_t count, std::size_t elem_size, std::size_t round_bytes);

// Ring reduce-scatter, n - 1 steps. At step s rank r sends chunk (r - s - 1)
// and receives chunk (r - s - 2) from the left, reducing it into its own copy.
// The chunk received at step s is the chunk sent at step s + 1; after the last
// step (s = n - 2) rank r holds chunk r reduced over all ranks.
inline int ring_steps(int size) {
  return size - 1;
}
inline int rs_send_chunk(int rank, int size, int step) {
  return mod(rank - step - 1, size);
}
inline int rs_recv_chunk(int rank, int size, int step) {
  return mod(rank - step - 2, size);
}

// Ring allgather, n - 1 steps, starting from "rank r holds chunk r". At step s
// rank r sends chunk (r - s) and receives chunk (r - s - 1), which it forwards
// at step s + 1.
inline int ag_send_chunk(int rank, int size, int step) {
  return mod(rank - step, size);
}
inline int ag_recv_chunk(int rank, int size, int step) {
  return mod(rank - step - 1, size);
}

// Chain broadcast: ranks in ring order starting at the root. Each rank
// receives from its parent (the left neighbour; none for the root) and
// forwards to its child (the right neighbour; none for the chain's last rank,
// the root's left neighbour). -1 means none.
struct ChainPosition {
  int parent = -1;
  int child = -1;
};
ChainPosition chain_position(int rank, int size, int root);

// Dissemination barrier: ceil(log2 n) rounds; in round k rank r sends to
// (r + 2^k) mod n and receives from (r - 2^k) mod n.
int dissemination_rounds(int size);
inline int dissemination_send_peer(int rank, int size, int round) {
  return mod(rank + (1 << round), size);
}
inline int dissemination_recv_peer(int rank, int size, int round) {
  return mod(rank - (1 << round), size);
}

}  // namespace chorus::patterns
