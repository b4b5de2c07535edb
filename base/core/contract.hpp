// The contract of a collective call: what every rank must agree on. It travels
// in the header of every message of the call, and the receiver compares it with
// its own, so ranks that issue different calls fail fast with an error naming
// both ranks and both calls.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace chorus {

enum class CollectiveKind : uint8_t {
  none = 0,  // internal traffic (goodbye, abort)
  allreduce = 1,
  broadcast = 2,
  allgather = 3,
  reduce_scatter = 4,
  barrier = 5,
  reduce = 6,
  gather = 7,
  scatter = 8,
  alltoall = 9,
  allgatherv = 10,
  reduce_scatterv = 11,
  send = 12,  // point-to-point: a message from one rank to another
};
inline constexpr int kCollectiveKinds = 13;

// 32 bytes, fixed layout (it is sent as is between ranks of one build).
struct CallSignature {
  uint64_t seq = 0;     // per-communicator sequence number of the call
  uint64_t count = 0;   // element count as the user passed it (v-variants: the total)
  int64_t root = -1;    // -1 when the collective has no root (send: the receiver)
  uint8_t kind = 0;     // CollectiveKind
  uint8_t dtype = 0;    // DataType
  uint8_t op = 0;       // ReduceOp (0 when none)
  uint8_t algo = 0;     // 1 + the algorithm's position in the registry (0: none)
  uint32_t layout = 0;  // v-variants: counts digest; send: the user's tag; allreduce: kWireLayout

  bool operator==(const CallSignature& o) const {
    return seq == o.seq && count == o.count && root == o.root && kind == o.kind &&
           dtype == o.dtype && op == o.op && algo == o.algo && layout == o.layout;
  }
};
static_assert(sizeof(CallSignature) == 32);
// CallSignature::layout of an allreduce compressed on the wire: this bit and
// the wire dtype (collectives/allreduce/wire.hpp).
inline constexpr uint32_t kWireLayout = 0x100;

std::string_view collective_name(CollectiveKind kind);  // a string literal
// Whether the collective combines values with a reduction op.
bool reduces(CollectiveKind kind);
// Names algorithms in describe() (the algorithm registry installs it; until
// then they show as numbers).
using AlgorithmNamer = std::string_view (*)(uint8_t algo);
void set_algorithm_namer(AlgorithmNamer namer);
// 64 bits that differ for signatures that differ (XXH3; equal signatures have
// equal digests, different ones collide with probability about 2^-64): what
// a shared-memory mail header carries instead of the whole signature.
uint64_t signature_digest(const CallSignature& sig);
// "allreduce #12 (count 1000, float32, sum, algorithm ring)"
std::string describe(const CallSignature& sig);

}  // namespace chorus

// Lets log lines take a signature as an argument, so it is only described
// when the line is actually written.
template <>
struct fmt::formatter<chorus::CallSignature> : fmt::formatter<std::string> {
  template <typename Context>
  auto format(const chorus::CallSignature& sig, Context& ctx) const {
    return fmt::formatter<std::string>::format(chorus::describe(sig), ctx);
  }
};
