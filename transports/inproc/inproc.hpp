// In-process transport: N ranks that are threads of one process, joined by a
// shared InprocFabric. Used by the algorithm tests.
//
// Semantics (those of transport.hpp):
//  - Matching: per (src, dst, tag) FIFO. A send matched to a posted receive is
//    copied straight into the receive buffer and completes both requests.
//  - Rendezvous: an unmatched send waits in its queue holding the caller's
//    span (no copy, no unexpected-message buffer) until the matching receive is
//    posted; so a send completes only once the receiver has posted for it. This
//    is stricter than a buffering transport and shows algorithms that wait on
//    a send before posting the receive that would release it.
//  - On match the sender's and receiver's CallSignature are compared; a
//    different signature or size fails both requests with
//    IoError(CHORUS_ERR_MISMATCH) naming both ranks and both calls.
//  - fail(code, message) (abort(reason): CHORUS_ERR_ABORTED) by any rank fails
//    every pending request of the whole fabric, and every later one, with
//    IoError(code, message).
//  - close() marks the rank closed: its own pending and later requests fail
//    with CHORUS_ERR_INVALID_USAGE; other ranks' receives from it and sends to
//    it (pending or later) fail with CHORUS_ERR_PEER_FAILURE naming it. close()
//    returns only when no copy into or out of its buffers is in progress. The
//    destructor closes.
//  - Zero-byte messages are supported.
//
// Thread safety: every method may be called from any thread. The fabric has a
// single mutex guarding all queues and flags; it is never held while calling
// out, and no other lock is taken under it (Completion is lock-free). Matched
// pairs leave the queues under the mutex and are copied after it is released,
// so copies of different ranks run in parallel.
#pragma once

#include <memory>
#include <string>

#include "transports/transport.hpp"

namespace chorus {

class InprocFabric {
 public:
  explicit InprocFabric(int size);
  ~InprocFabric();
  InprocFabric(const InprocFabric&) = delete;
  InprocFabric& operator=(const InprocFabric&) = delete;

  int size() const { return size_; }
  // Same as InprocTransport(rank).fail(code, message): fails the whole fabric.
  void fail_all(chorus_result_t code, const std::string& message);
  bool aborted() const;

 private:
  friend class InprocTransport;
  struct State;
  int size_;
  std::unique_ptr<State> state_;
};

std::shared_ptr<InprocFabric> make_inproc_fabric(int size);

class InprocTransport : public Transport {
 public:
  InprocTransport(std::shared_ptr<InprocFabric> fabric, int rank);
  ~InprocTransport() override;
  InprocTransport(const InprocTransport&) = delete;
  InprocTransport& operator=(const InprocTransport&) = delete;

  std::string_view name() const override { return "inproc"; }
  int rank() const override { return rank_; }
  int size() const override { return fabric_->size(); }
  bool can_connect(int peer) const override { return peer >= 0 && peer < size(); }

  RequestPtr isend(int peer, uint32_t tag, const CallSignature& sig,
                   std::span<const std::byte> data) override;
  RequestPtr irecv(int peer, uint32_t tag, const CallSignature& sig,
                   std::span<std::byte> data) override;
  void check_failed() override;
  void close() override;
  // Spares nothing: in-process worlds (tests) fail as a whole.
  void fail(chorus_result_t code, const std::string& message, const Spared& spared) override;

 private:
  std::shared_ptr<InprocFabric> fabric_;
  int rank_;
};

}  // namespace chorus
