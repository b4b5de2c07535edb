#include "collectives/call.hpp"

#define XXH_INLINE_ALL
#include <fmt/format.h>
#include <xxhash.h>

#include <limits>

#include "base/core/error.hpp"
#include "collectives/common/validate.hpp"
#include "collectives/scattered.hpp"

namespace chorus {
namespace {

std::size_t checked_sum(const std::size_t* counts, int size, const char* what) {
  std::size_t total = 0;
  for (int r = 0; r < size; ++r) {
    if (counts[r] > std::numeric_limits<std::size_t>::max() - total)
      throw UsageError(fmt::format("{}: the counts add up to more than a size_t holds", what));
    total += counts[r];
  }
  return total;
}

void check_bytes(std::size_t elements, std::size_t elem, const char* what) {
  if (elements > std::numeric_limits<std::size_t>::max() / elem)
    throw UsageError(fmt::format("{}: {} elements are too many bytes", what, elements));
}

void require(const void* p, std::size_t bytes, const char* name, const char* what) {
  if (bytes > 0 && p == nullptr)
    throw UsageError(fmt::format("{}: {} is NULL with a non-zero count", what, name));
}

}  // namespace

uint32_t counts_digest(const std::size_t* counts, int size) {
  if (!counts || size <= 0) return 0;
  const uint64_t h = XXH3_64bits(counts, static_cast<std::size_t>(size) * sizeof(std::size_t));
  const auto folded = static_cast<uint32_t>(h ^ (h >> 32));
  return folded == 0 ? 1 : folded;  // 0 means "no counts"
}

void validate_allreduce_buffers(const void* send_buffer, const void* recv_buffer, std::size_t count,
                                std::size_t elem, const char* what) {
  check_bytes(count, elem, what);
  const std::size_t block = count * elem;
  const auto* send = static_cast<const std::byte*>(send_buffer);
  const auto* recv = static_cast<const std::byte*>(recv_buffer);
  require(send, block, "sendbuf", what);
  require(recv, block, "recvbuf", what);
  if (send != recv && overlaps(send, block, recv, block))
    throw UsageError(
        fmt::format("{}: sendbuf and recvbuf overlap without being the same buffer", what));
}

CallShape validate(const CollectiveCall& c, int rank, int size) {
  // The names are string literals, so NUL-terminated.
  const char* what = collective_name(c.kind).data();
  if (c.kind == CollectiveKind::none || c.kind == CollectiveKind::send)
    throw InvariantError(fmt::format("validate: {} is not a collective", what));
  if (c.kind != CollectiveKind::barrier && !valid_dtype(static_cast<int>(c.dtype)))
    throw UsageError(fmt::format("{}: unknown dtype {}", what, static_cast<int>(c.dtype)));
  if (reduces(c.kind) && !valid_op(static_cast<int>(c.op)))
    throw UsageError(fmt::format("{}: unknown reduction op {}", what, static_cast<int>(c.op)));
  if (c.memory != MemoryKind::host)
    throw UsageError(CHORUS_ERR_UNSUPPORTED,
                     fmt::format("{}: device buffers are not supported by this build", what));
  if (c.wire && *c.wire != DataType::f32) {
    if (*c.wire != DataType::bf16 && *c.wire != DataType::f16)
      throw UsageError(fmt::format("{}: wire dtype {} is not bfloat16, float16 or float32 (none)",
                                   what, static_cast<int>(*c.wire)));
    if (c.kind != CollectiveKind::allreduce)
      throw UsageError(
          fmt::format("{}: compression on the wire ({}) applies to float32 allreduce only", what,
                      dtype_name(*c.wire)));
    if (c.dtype != DataType::f32)
      throw UsageError(fmt::format(
          "{}: compression on the wire ({}) applies to float32 data only, and this call's dtype "
          "is {}",
          what, dtype_name(*c.wire), dtype_name(c.dtype)));
  }
  if (c.scattered && c.kind != CollectiveKind::allreduce)
    throw InvariantError(fmt::format("{}: buffers in parts are for allreduce only", what));
  if (c.rooted() && (c.root < 0 || c.root >= size))
    throw UsageError(fmt::format("{}: root {} is not a rank of {}", what, c.root, size));

  CallShape shape;
  if (c.kind == CollectiveKind::barrier) return shape;
  shape.elem = dtype_size(c.dtype);
  const std::size_t e = shape.elem;
  const bool at_root = rank == c.root;
  const auto* send = static_cast<const std::byte*>(c.send);
  const auto* recv = static_cast<const std::byte*>(c.recv);

  if (c.is_v()) {
    if (!c.counts) throw UsageError(fmt::format("{}: counts is NULL", what));
    shape.total = checked_sum(c.counts, size, what);
    check_bytes(shape.total, e, what);
    for (int r = 0; r < rank; ++r) shape.offset += c.counts[r];
    shape.bytes = shape.total * e;
  } else {
    check_bytes(c.count, e, what);
    if (c.kind != CollectiveKind::allreduce && c.kind != CollectiveKind::broadcast &&
        c.kind != CollectiveKind::reduce)
      shape.total = checked_total(c.count, size, e, what);
    shape.bytes = (shape.total ? shape.total : c.count) * e;
  }
  const std::size_t block = c.count * e;  // one rank's block (non-v)
  const std::size_t whole = shape.total * e;

  switch (c.kind) {
    case CollectiveKind::allreduce:
      if (!c.scattered)
        validate_allreduce_buffers(send, recv, c.count, e, what);
      else if (c.scattered->bytes() != block)
        throw InvariantError(fmt::format("{}: {} elements of {} bytes in parts of {} bytes", what,
                                         c.count, e, c.scattered->bytes()));
      break;
    case CollectiveKind::broadcast:
      require(c.recv, block, "buf", what);
      break;
    case CollectiveKind::reduce:
      require(c.send, block, "sendbuf", what);
      if (at_root) {
        require(c.recv, block, "recvbuf", what);
        if (send != recv && overlaps(send, block, recv, block))
          throw UsageError(fmt::format(
              "{}: sendbuf and recvbuf overlap at the root without being the same buffer", what));
      }
      break;
    case CollectiveKind::allgather:
    case CollectiveKind::gather: {
      const bool receives = c.kind == CollectiveKind::allgather || at_root;
      require(c.send, block, "sendbuf", what);
      if (!receives) break;
      require(c.recv, whole, "recvbuf", what);
      const int mine = c.kind == CollectiveKind::allgather ? rank : c.root;
      if (send != recv + block * static_cast<std::size_t>(mine) &&
          overlaps(send, block, recv, whole))
        throw UsageError(fmt::format(
            "{}: sendbuf overlaps recvbuf (in place means sendbuf == recvbuf + {} * count)", what,
            c.kind == CollectiveKind::allgather ? "rank" : "root"));
      break;
    }
    case CollectiveKind::scatter:
    case CollectiveKind::reduce_scatter: {
      const bool sends = c.kind == CollectiveKind::reduce_scatter || at_root;
      require(c.recv, block, "recvbuf", what);
      if (!sends) break;
      require(c.send, whole, "sendbuf", what);
      const int mine = c.kind == CollectiveKind::reduce_scatter ? rank : c.root;
      if (recv != send + block * static_cast<std::size_t>(mine) &&
          overlaps(send, whole, recv, block))
        throw UsageError(fmt::format(
            "{}: recvbuf overlaps sendbuf (in place means recvbuf == sendbuf + {} * count)", what,
            c.kind == CollectiveKind::reduce_scatter ? "rank" : "root"));
      break;
    }
    case CollectiveKind::alltoall:
      require(c.send, whole, "sendbuf", what);
      require(c.recv, whole, "recvbuf", what);
      if (overlaps(send, whole, recv, whole))
        throw UsageError(fmt::format("{}: sendbuf and recvbuf overlap", what));
      break;
    case CollectiveKind::allgatherv: {
      const std::size_t mine = c.counts[rank] * e;
      require(c.send, mine, "sendbuf", what);
      require(c.recv, whole, "recvbuf", what);
      if (send != recv + shape.offset * e && overlaps(send, mine, recv, whole))
        throw UsageError(fmt::format(
            "{}: sendbuf overlaps recvbuf (in place means sendbuf == recvbuf + the offset of this "
            "rank's block)",
            what));
      break;
    }
    case CollectiveKind::reduce_scatterv: {
      const std::size_t mine = c.counts[rank] * e;
      require(c.send, whole, "sendbuf", what);
      require(c.recv, mine, "recvbuf", what);
      if (recv != send + shape.offset * e && overlaps(send, whole, recv, mine))
        throw UsageError(fmt::format(
            "{}: recvbuf overlaps sendbuf (in place means recvbuf == sendbuf + the offset of this "
            "rank's block)",
            what));
      break;
    }
    default:
      break;
  }
  return shape;
}

CallSignature signature_of(const CollectiveCall& c, int size, const CallShape& shape) {
  CallSignature sig;
  sig.kind = static_cast<uint8_t>(c.kind);
  if (c.kind == CollectiveKind::barrier) {
    sig.dtype = static_cast<uint8_t>(DataType::u8);
    return sig;
  }
  sig.count = c.is_v() ? shape.total : c.count;
  sig.dtype = static_cast<uint8_t>(c.dtype);
  sig.op = reduces(c.kind) ? static_cast<uint8_t>(c.op) : 0;
  sig.root = c.rooted() ? c.root : -1;
  if (c.is_v()) sig.layout = counts_digest(c.counts, size);
  return sig;
}

}  // namespace chorus
