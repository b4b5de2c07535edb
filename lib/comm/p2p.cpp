// Point-to-point messages of a communicator: tagged send and receive.
//
// A message travels in the communicator's point-to-point tag space
// (link.hpp: bit 31, the communicator's id, the user's tag) with a signature
// the receiver compares with its own: kind send, count, dtype, the receiver's
// rank, the user tag, and as sequence number the message's place among those
// from this sender to this receiver with this tag. Both sides count the same
// way, so a message matches the receive issued in the same place, and a
// count or dtype that differs fails as a mismatch naming both ranks. No
// collective sequence number is taken: messages and collectives interleave
// freely, and messages of one (peer, tag) stay in order.
#include <fmt/format.h>

#include <limits>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "lib/comm/communicator.hpp"

namespace chorus {
namespace {

void check_p2p(const void* buf, std::size_t count, DataType dtype, int peer, int tag, int size,
               const char* what) {
  if (!valid_dtype(static_cast<int>(dtype)))
    throw UsageError(fmt::format("{}: unknown dtype {}", what, static_cast<int>(dtype)));
  if (peer < 0 || peer >= size)
    throw UsageError(fmt::format("{}: peer {} is not a rank of {}", what, peer, size));
  if (tag < 0 || static_cast<uint32_t>(tag) > kMaxUserTag)
    throw UsageError(fmt::format("{}: tag {} is outside 0..{}", what, tag, kMaxUserTag));
  if (count > 0 && buf == nullptr)
    throw UsageError(fmt::format("{}: buf is NULL with a non-zero count", what));
  if (count > std::numeric_limits<std::size_t>::max() / dtype_size(dtype))
    throw UsageError(fmt::format("{}: {} elements are too many bytes", what, count));
}

}  // namespace

CallSignature Communicator::p2p_signature(std::size_t count, DataType dtype, int receiver, int tag,
                                          int peer, bool sending) {
  CallSignature sig;
  sig.kind = static_cast<uint8_t>(CollectiveKind::send);
  sig.count = count;
  sig.dtype = static_cast<uint8_t>(dtype);
  sig.root = receiver;
  sig.layout = static_cast<uint32_t>(tag);
  std::lock_guard lock(p2p_mu_);
  auto& counters = sending ? sent_ : received_;
  sig.seq = ++counters[{peer, tag}];
  return sig;
}

void Communicator::fail_p2p(const std::exception_ptr& error, const CallSignature& sig) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    logger("comm").error("rank {}: {} failed: {}", rank(), describe(sig), e.what());
    // A receive left posted could land in a buffer its owner reuses: the
    // transport must let go of it, which aborting does.
    fail(e.code(), e.what());
    const std::string message = with_local_ranks(e.what());
    if (dynamic_cast<const IoError*>(&e)) throw IoError(e.code(), message);
    throw;
  }
}

Message Communicator::isend(const void* buf, std::size_t count, DataType dtype, int peer, int tag) {
  check_p2p(buf, count, dtype, peer, tag, size(), "send");
  if (peer == rank()) throw UsageError("send: peer is this rank (a rank cannot send to itself)");
  check_usable();
  const CallSignature sig = p2p_signature(count, dtype, peer, tag, peer, true);
  const auto bytes =
      std::span<const std::byte>(static_cast<const std::byte*>(buf), count * dtype_size(dtype));
  return Message{link_->transport->isend(world_.member(peer),
                                         p2p_tag(id_, static_cast<uint32_t>(tag)), sig, bytes),
                 sig};
}

Message Communicator::irecv(void* buf, std::size_t count, DataType dtype, int peer, int tag) {
  check_p2p(buf, count, dtype, peer, tag, size(), "recv");
  if (peer == rank()) throw UsageError("recv: peer is this rank (a rank cannot send to itself)");
  check_usable();
  const CallSignature sig = p2p_signature(count, dtype, rank(), tag, peer, false);
  const auto bytes = std::span<std::byte>(static_cast<std::byte*>(buf), count * dtype_size(dtype));
  return Message{link_->transport->irecv(world_.member(peer),
                                         p2p_tag(id_, static_cast<uint32_t>(tag)), sig, bytes),
                 sig};
}

void Communicator::wait(const Message& message, const Deadline& deadline, bool abort_on_timeout) {
  try {
    wait_one(*link_->transport, message.request, deadline, wait_spin(), message.sig);
  } catch (const Error& e) {
    if (e.code() == CHORUS_ERR_TIMEOUT && !message.request->done() && !abort_on_timeout) throw;
    fail_p2p(std::current_exception(), message.sig);
  }
}

void Communicator::send(const void* buf, std::size_t count, DataType dtype, int peer, int tag,
                        const Deadline& deadline) {
  wait(isend(buf, count, dtype, peer, tag), deadline);
}

void Communicator::recv(void* buf, std::size_t count, DataType dtype, int peer, int tag,
                        const Deadline& deadline) {
  wait(irecv(buf, count, dtype, peer, tag), deadline);
}

}  // namespace chorus
