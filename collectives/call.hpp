// One collective call's arguments, in one place: what the user passed, checked
// once (validate), and the signature every rank's call must match.
//
// Buffers and counts per kind (counts are elements of dtype; n = team size;
// "at root" means other ranks' buffer is ignored and may be null):
//   allreduce        send[count] -> recv[count]               in place: send == recv
//   broadcast        recv[count] (root's is the source)       send unused
//   reduce           send[count] -> recv[count] at root       in place at root: send == recv
//   allgather        send[count] -> recv[n * count]           in place: send == recv + rank * count
//   gather           send[count] -> recv[n * count] at root   in place at root: send == recv + root
//   * count scatter          send[n * count] at root -> recv[count]   in place at root: recv ==
//   send + root * count reduce_scatter   send[n * count] -> recv[count]           in place: recv ==
//   send + rank * count alltoall         send[n * count] -> recv[n * count]       block j of send
//   goes to rank j; no overlap allgatherv       send[counts[rank]] -> recv[sum counts]   blocks
//   back to back in rank order;
//                                                             in place: send == recv + offset of
//                                                             rank
//   reduce_scatterv  send[sum counts] -> recv[counts[rank]]   in place: recv == send + offset of
//   rank barrier          nothing
// v-variants read `counts` (n entries, the same on every rank: its digest is
// part of the signature, so ranks that disagree fail as a mismatch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "base/core/contract.hpp"
#include "base/core/dtype.hpp"

namespace chorus {

class ScatteredBuffers;  // collectives/scattered.hpp

// Where a buffer lives. Only host memory is supported today; the field is the
// room that device buffers (and their stream) will use.
enum class MemoryKind : uint8_t { host = 0, device = 1 };

struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::none;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;
  const std::size_t* counts = nullptr;  // v-variants: per-rank counts (n entries)
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;  // reducing collectives only
  int root = -1;                // rooted collectives only
  MemoryKind memory = MemoryKind::host;
  void* stream = nullptr;  // device buffers: the stream the call is ordered on
  // float32 allreduce: dtype on the wire (bf16 or f16; f32: not compressed);
  // nullopt: CHORUS_WIRE_DTYPE. Other calls: nullopt or f32 (validate()
  // refuses bf16/f16). collectives/allreduce/wire.hpp.
  std::optional<DataType> wire;
  // Allreduce only: the input and output lie in these parts (send and recv
  // are unused); their bytes are count elements. Runs blocking only
  // (Communicator::run), since the parts are borrowed for the call.
  const ScatteredBuffers* scattered = nullptr;

  bool rooted() const {
    return kind == CollectiveKind::broadcast || kind == CollectiveKind::reduce ||
           kind == CollectiveKind::gather || kind == CollectiveKind::scatter;
  }
  bool is_v() const {
    return kind == CollectiveKind::allgatherv || kind == CollectiveKind::reduce_scatterv;
  }
};

// What validate() derives for the rest of the call's life.
struct CallShape {
  std::size_t elem = 0;   // bytes per element
  std::size_t bytes = 0;  // the call's size for selection: the largest buffer any rank moves
  std::size_t total = 0;  // v-variants: sum of counts; others: n * count where blocks exist
  // v-variants: element offset of `rank`'s block (prefix sum of counts)
  std::size_t offset = 0;
};

// Checks every argument of `call` made by `rank` of `size` ranks, and throws
// UsageError (CHORUS_ERR_INVALID_ARGUMENT) with a message that names the call
// and the argument; returns the call's shape. Nothing here is collective.
CallShape validate(const CollectiveCall& call, int rank, int size);
// validate()'s checks of an allreduce's count and buffers (`elem` bytes per
// element), for a caller whose dtype and op are checked already: the fused
// allreduce, made a thousand times a step. `what` names the call.
void validate_allreduce_buffers(const void* send, const void* recv, std::size_t count,
                                std::size_t elem, const char* what);

// The signature of the call on a team of `size` ranks (seq and algo are
// filled in later).
CallSignature signature_of(const CollectiveCall& call, int size, const CallShape& shape);

// The v-variants' counts digest (CallSignature::layout).
uint32_t counts_digest(const std::size_t* counts, int size);

}  // namespace chorus
