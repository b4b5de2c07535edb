// ScratchPool slots used by the algorithms under collectives/. One collective
// runs at a time on a communicator, so algorithms that run one after another
// (reduce-scatter then allgather) may share a slot. Callers above (the
// communicator, fusion) should use slots from kFirstFreeSlot on.
#pragma once

namespace chorus::scratch_slot {

inline constexpr int ring_staging = 0;    // ring pipeline: received segments before reduction
inline constexpr int small_exchange = 1;  // recursive doubling: the partner's buffer
inline constexpr int shm_reduction =
    2;                                  // shared memory: one reduced piece, before it is copied out
inline constexpr int tree_partial = 3;  // binomial reduce: this rank's partial result
inline constexpr int tree_incoming = 4;  // binomial reduce: a child's partial result
inline constexpr int owned_chunk = 5;    // ring reduce: a non-root's reduced chunk
inline constexpr int wire = 6;  // compression on the wire: the call's data in the wire dtype
inline constexpr int hierarchy_blocks = 7;  // hierarchical allgather: every block, in host order
// A call in parts (common/parts_io.hpp) over a transport without gather
// sends: what one stage or exchange sends, packed.
inline constexpr int parts_packed = 8;
inline constexpr int kFirstFreeSlot = 9;

}  // namespace chorus::scratch_slot
