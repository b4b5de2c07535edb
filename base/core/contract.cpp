#include "base/core/contract.hpp"

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <atomic>
#include <cstring>

#include "base/core/dtype.hpp"

namespace chorus {

namespace {
std::atomic<AlgorithmNamer> algorithm_namer{nullptr};
}

std::string_view collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::allreduce:
      return "allreduce";
    case CollectiveKind::broadcast:
      return "broadcast";
    case CollectiveKind::allgather:
      return "allgather";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
    case CollectiveKind::barrier:
      return "barrier";
    case CollectiveKind::reduce:
      return "reduce";
    case CollectiveKind::gather:
      return "gather";
    case CollectiveKind::scatter:
      return "scatter";
    case CollectiveKind::alltoall:
      return "alltoall";
    case CollectiveKind::allgatherv:
      return "allgatherv";
    case CollectiveKind::reduce_scatterv:
      return "reduce_scatterv";
    case CollectiveKind::send:
      return "send";
    case CollectiveKind::none:
      break;
  }
  return "internal";
}

bool reduces(CollectiveKind kind) {
  return kind == CollectiveKind::allreduce || kind == CollectiveKind::reduce_scatter ||
         kind == CollectiveKind::reduce || kind == CollectiveKind::reduce_scatterv;
}

void set_algorithm_namer(AlgorithmNamer namer) {
  algorithm_namer.store(namer);
}

uint64_t signature_digest(const CallSignature& sig) {
  // The fields operator== compares, and nothing else.
  CallSignature compared;
  compared.seq = sig.seq;
  compared.count = sig.count;
  compared.root = sig.root;
  compared.kind = sig.kind;
  compared.dtype = sig.dtype;
  compared.op = sig.op;
  compared.algo = sig.algo;
  compared.layout = sig.layout;
  return XXH3_64bits(&compared, sizeof compared);
}

std::string describe(const CallSignature& sig) {
  auto kind = static_cast<CollectiveKind>(sig.kind);
  std::string out = fmt::format("{} #{} (count {}", collective_name(kind), sig.seq, sig.count);
  if (valid_dtype(sig.dtype))
    out += fmt::format(", {}", dtype_name(static_cast<DataType>(sig.dtype)));
  if (reduces(kind) && valid_op(sig.op))
    out += fmt::format(", {}", op_name(static_cast<ReduceOp>(sig.op)));
  if (kind == CollectiveKind::send) {
    out += fmt::format(", to rank {}, tag {}", sig.root, sig.layout);
  } else {
    if (sig.root >= 0) out += fmt::format(", root {}", sig.root);
    if (kind == CollectiveKind::allreduce && (sig.layout & kWireLayout) &&
        valid_dtype(static_cast<int>(sig.layout & 0xFFu)))
      out += fmt::format(", {} on the wire", dtype_name(static_cast<DataType>(sig.layout & 0xFFu)));
    else if (sig.layout != 0)
      out += fmt::format(", counts digest {:08x}", sig.layout);
  }
  if (sig.algo != 0) {
    AlgorithmNamer namer = algorithm_namer.load();
    if (namer)
      out += fmt::format(", algorithm {}", namer(sig.algo));
    else
      out += fmt::format(", algorithm {}", sig.algo);
  }
  return out + ")";
}

}  // namespace chorus
