// The shared-memory pipeline that the shm collectives are plans for.
//
// Terms: n ranks share a Domain (collectives/shm/domain.hpp). A call is cut
// into rounds; in round g every rank uses slot g % slots of its staging area,
// a buffer of n pieces. A plan says, per round, what each rank stages into its
// own slot, which piece (if any) it reduces across all ranks' slots, and what
// it gathers from the others' slots into its output.
//
// Steps of round g, on every rank:
//   1. wait until all ranks drained round g - slots (the slot is free again);
//   2. stage: copy its input pieces into its slot; publish staged = g + 1;
//   3. wait until all ranks staged g;
//   4. reduce (plans that reduce): slot_0[p] op slot_1[p] op ... op
//      slot_{n-1}[p] for its piece p, in rank order (so every rank's copy of a
//      piece is bit-identical; its own input is read in place where the plan
//      says so), into its own slot[p] (allreduce) or a cache-resident scratch
//      piece, then copied to dst; publish reduced = g + 1;
//   5. stage round g + 1 (steps 1-2) while the others finish reducing round g;
//   6. wait until all ranks reduced g (when it gathers reduced pieces);
//   7. gather: copy the others' pieces into its output; publish drained = g + 1.
//
// Bytes moved per rank (allreduce of N bytes): (n-1)N/n copied into the segment,
// N (n inputs of N/n) read and N/n written by the reduction, (n-1)N/n copied
// out. With slots of a few hundred KiB the segment stays in the last-level
// cache, so main memory sees about one read of the input and one write of the
// output: no system call, no kernel copy. Outputs of kStreamingMin bytes or
// more are written with streaming stores, which skip reading the destination
// (measured here, 2 ranks, three runs each: +8 % at 64 MiB, +3 % at 32 MiB,
// on par at 128 MiB; mixed at 16 MiB, where the output may still be cached),
// except in place, where the round has just read the output's lines: there
// streaming stores cost 2 ranks 25-30 % (32 MiB 4.2-4.7 against 3.2-3.5 ms,
// 64 MiB 8.9-9.5 against 6.8-7.3 ms, three alternations, 2026-12-05), while
// out of place they still gain 8-12 %.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/core/dtype.hpp"
#include "collectives/context.hpp"
#include "collectives/tuner/cost_model.hpp"

namespace chorus {

struct ShmStage {  // copy bytes from src into this rank's slot at offset
  const std::byte* src;
  std::size_t offset;
  std::size_t bytes;
};
struct ShmReduce {  // reduce every rank's slot[offset, offset + bytes) into dst
  std::size_t offset = 0;
  std::byte* dst = nullptr;  // null: the result is only for the others to gather
  std::size_t bytes = 0;
  // This rank's own contribution, read from here instead of its slot (which
  // it then need not stage): saves copying 1/n of the input.
  const std::byte* own = nullptr;
};
struct ShmGather {  // copy rank `from`'s slot[offset, offset + bytes) into dst
  int from;
  std::size_t offset;
  std::byte* dst;
  std::size_t bytes;
};

class ShmPlan {
 public:
  virtual ~ShmPlan() = default;
  virtual uint64_t rounds() const = 0;
  // Bytes this rank writes to its output: large outputs are written with
  // streaming stores (base/core/memcopy.hpp), unless the output is the input.
  virtual std::size_t output_bytes() const = 0;
  // The output is the call's input (in place): each round reads its lines
  // just before they are written, so they are in cache, and streaming
  // stores, which write around the cache, only evict them.
  virtual bool output_is_input() const { return false; }
  virtual void stage(uint64_t round, std::vector<ShmStage>& out) const = 0;
  virtual bool reduces() const { return false; }
  // True when ranks gather reduced pieces (allreduce): the reducer copies its
  // result back into its slot, and gathering waits for every reduction.
  virtual bool gathers_reduced() const { return false; }
  // The stretches of its piece that it reduces: one, or one per buffer
  // the piece spans (collectives/scattered.hpp).
  virtual void reduce(uint64_t /*round*/, std::vector<ShmReduce>& /*out*/) const {}
  virtual void gather(uint64_t /*round*/, std::vector<ShmGather>& /*out*/) const {}
};

// Runs the plan on ctx.shm (which must be set). `dtype`/`op` matter only for
// plans that reduce; AVG is scaled by whoever reduces a piece.
inline constexpr std::size_t kStreamingMin = 32 << 20;

void run_shm_pipeline(CollectiveContext& ctx, const ShmPlan& plan, DataType dtype, ReduceOp op);

// Estimated microseconds of a shared-memory call of `bytes` on `team`
// (which has a domain): one synchronisation per round (three on the
// pipeline), every byte copied in and out of the segment, and
// `reduce_fraction` of it reduced; calls that fit the latency path take one
// synchronisation.
double shm_estimate_us(const CostModel& model, const Team& team, std::size_t bytes,
                       double reduce_fraction);

// What the domain's waits need from the call's context.
shm::WaitSpec shm_wait_spec(CollectiveContext& ctx);

// dst = srcs[0] op srcs[1] op ... in order (dst may be one of them); AVG
// divides by srcs.size() at the end.
void reduce_in_rank_order(std::byte* dst, std::span<const std::byte* const> srcs, std::size_t count,
                          DataType dtype, ReduceOp op);

}  // namespace chorus
