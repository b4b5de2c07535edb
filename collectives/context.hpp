// What an algorithm gets to run one collective call: the team it runs over
// (its ranks, transport, tag and shared-memory domain), the call's signature
// (sent with every message), its deadline and tuning knobs.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "base/core/contract.hpp"
#include "base/core/deadline.hpp"
#include "base/core/dtype.hpp"
#include "base/core/scratch.hpp"
#include "collectives/shm/domain.hpp"
#include "collectives/team.hpp"
#include "transports/transport.hpp"

namespace chorus {

struct CollectiveContext {
  const Team& team;
  Transport& transport;  // team.transport: reaches every member
  ScratchPool& scratch;
  uint32_t tag;  // team.tag; all of the call's traffic uses it
  CallSignature sig;
  Deadline deadline;
  std::size_t segment_bytes;  // largest single message of a pipelined step
  Spin spin;                  // how waits spin before they sleep
  // team.shm: the shared-memory domain of the team's ranks when they share a
  // host and shared memory is allowed; null otherwise.
  shm::Domain* shm = nullptr;

  static CollectiveContext over(const Team& team, ScratchPool& scratch, const CallSignature& sig,
                                const Deadline& deadline, std::size_t segment_bytes, Spin spin) {
    return CollectiveContext{team,     *team.transport, scratch, team.tag, sig,
                             deadline, segment_bytes,   spin,    team.shm};
  }

  // Ranks and peers are the team's indices.
  int rank() const { return team.index; }
  int size() const { return team.size(); }
  RequestPtr send(int peer, std::span<const std::byte> data) {
    return transport.isend(team.member(peer), tag, sig, data);
  }
  RequestPtr recv(int peer, std::span<std::byte> data) {
    return transport.irecv(team.member(peer), tag, sig, data);
  }
  // Zero-byte messages that settle the verdict of a rank whose own part of a
  // call is done before every rank's is (a broadcast root or middle rank, a
  // gather's senders): without one it would return success before a rank
  // further on could disagree. The confirmation comes from a rank that
  // could only send it once everything arrived and carries the call's
  // signature, so a peer in another call fails the signature check on one
  // side or the other, and a failed receiver's notice reaches the others
  // before their verdict.
  RequestPtr confirm(int peer) { return send(peer, {}); }
  RequestPtr await_confirmation(int peer) { return recv(peer, {}); }
  void wait(const RequestPtr& r) { wait_one(transport, r, deadline, spin, sig); }
  void wait(std::span<const RequestPtr> rs) { wait_all(transport, rs, deadline, spin, sig); }
  // Confirms to every other rank and waits until the confirmations are out
  // (a root that has every part, or has heard from every rank).
  void confirm_to_all() {
    std::vector<RequestPtr> confirmations;
    for (int r = 0; r < size(); ++r)
      if (r != rank()) confirmations.push_back(confirm(r));
    wait(confirmations);
  }
};

}  // namespace chorus
