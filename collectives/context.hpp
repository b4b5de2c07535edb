// What an algorithm gets to run one collective call: the transport, the call's
// signature (sent with every message), its deadline and tuning knobs.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "base/core/contract.hpp"
#include "base/core/deadline.hpp"
#include "base/core/dtype.hpp"
#include "base/core/scratch.hpp"
#include "collectives/shm/domain.hpp"
#include "transports/transport.hpp"

namespace chorus {

struct CollectiveContext {
  Transport& transport;
  ScratchPool& scratch;
  uint32_t tag;  // the communicator's tag; all its traffic uses it
  CallSignature sig;
  Deadline deadline;
  std::size_t segment_bytes;  // largest single message of a pipelined step
  Spin spin;                  // how waits spin before they sleep
  // The communicator's shared-memory domain when all its ranks share a host
  // and shared memory is allowed; null otherwise.
  shm::Domain* shm = nullptr;

  int rank() const { return transport.rank(); }
  int size() const { return transport.size(); }
  RequestPtr send(int peer, std::span<const std::byte> data) {
    return transport.isend(peer, tag, sig, data);
  }
  RequestPtr recv(int peer, std::span<std::byte> data) {
    return transport.irecv(peer, tag, sig, data);
  }
  void wait(const RequestPtr& r) { wait_one(transport, r, deadline, spin, sig); }
  void wait(std::span<const RequestPtr> rs) { wait_all(transport, rs, deadline, spin, sig); }
};

}  // namespace chorus
