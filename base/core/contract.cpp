#include "base/core/contract.hpp"

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstring>

#include "base/core/dtype.hpp"

namespace chorus {

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
    case CollectiveKind::none:
      break;
  }
  return "internal";
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
  return XXH3_64bits(&compared, sizeof compared);
}

std::string describe(const CallSignature& sig) {
  auto kind = static_cast<CollectiveKind>(sig.kind);
  std::string out = fmt::format("{} #{} (count {}", collective_name(kind), sig.seq, sig.count);
  if (valid_dtype(sig.dtype))
    out += fmt::format(", {}", dtype_name(static_cast<DataType>(sig.dtype)));
  if (kind == CollectiveKind::allreduce || kind == CollectiveKind::reduce_scatter) {
    if (valid_op(sig.op)) out += fmt::format(", {}", op_name(static_cast<ReduceOp>(sig.op)));
  }
  if (sig.root >= 0) out += fmt::format(", root {}", sig.root);
  if (sig.algo != 0) out += fmt::format(", algorithm {}", sig.algo);
  return out + ")";
}

}  // namespace chorus
