// What an algorithm gets to run one collective call: the team it runs over
// (its ranks, transport, tag and shared-memory domain), the call's signature
// (sent with every message), its deadline and tuning knobs.
#pragma once

#include <chrono>
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
  // The context of a whole call (the communicator's), not of one stage of
  // a composed algorithm: a root's release is then the call's commit point
  // (commit).
  bool whole_call = false;
  int extensions = 0;  // of the deadline so far (wait)
  // Ring and Rabenseifner allreduce: rounds of this many bytes for a call of
  // kRingRoundsFrom rounds or more (patterns::ring_round_elems); 0: the
  // whole call at once. Set by the communicator for its world; stages of
  // composed algorithms run whole.
  std::size_t ring_round_bytes = 0;

  static CollectiveContext over(const Team& team, ScratchPool& scratch, const CallSignature& sig,
                                const Deadline& deadline, std::size_t segment_bytes, Spin spin) {
    return CollectiveContext{team, *team.transport, scratch, team.tag, sig, deadline, segment_bytes,
                             spin, team.shm,        false,   0,        0};
  }

  // Ranks and peers are the team's indices.
  int rank() const { return team.index; }
  int size() const { return team.size(); }
  RequestPtr send(int peer, std::span<const std::byte> data) {
    return transport.isend(team.member(peer), tag, sig, data);
  }
  // Transport::gathers_sends and isend_gather, to a member of the team.
  bool gathers_sends(int peer) const { return transport.gathers_sends(team.member(peer)); }
  RequestPtr send_gather(int peer, std::span<const std::span<const std::byte>> pieces) {
    return transport.isend_gather(team.member(peer), tag, sig, pieces);
  }
  RequestPtr recv(int peer, std::span<std::byte> data) {
    return transport.irecv(team.member(peer), tag, sig, data);
  }
  // Transport::scatters_recvs and irecv_scatter, from a member of the team.
  bool scatters_recvs(int peer) const { return transport.scatters_recvs(team.member(peer)); }
  RequestPtr recv_scatter(int peer, std::span<const std::span<std::byte>> pieces) {
    return transport.irecv_scatter(team.member(peer), tag, sig, pieces);
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
  // Waits as wait_all does, but a deadline that passes is not yet a verdict
  // when every peer still waited on has done its part of the call (what it
  // sends is on its way, what it receives has come): the deadline then
  // moves on by kExtension, at most kMaxExtensions times. Asking seals a
  // peer whose part is not done (Transport::parts_done): it will not do
  // it, and the call fails on every rank.
  static constexpr std::chrono::seconds kExtension{1};
  static constexpr int kMaxExtensions = 10;
  void wait(std::span<const RequestPtr> rs);
  // After a wait on `pending` timed out: asks the peers of the requests not
  // done, and moves the deadline on if every one's part is done. False when
  // the timeout is the verdict.
  bool extend_deadline(std::span<const RequestPtr> pending);
  void wait(const RequestPtr& r) { wait(std::span<const RequestPtr>(&r, 1)); }
  // A root's release (confirm_to_all, the broadcast's last confirmations)
  // is the call's commit point: no rank finishes before it, and every rank
  // can once it is sent. So the root marks its part done first
  // (mark_part_done), or fails the call if a peer whose deadline passed
  // sealed it. Only for the whole call: a stage of a composed algorithm is
  // no commit point.
  void commit() {
    if (whole_call) mark_part_done(transport, tag, sig);
  }
  // The root's release: confirms to every other rank and waits until the
  // confirmations are out (a root that has every part, or has heard from
  // every rank).
  void confirm_to_all() {
    commit();
    std::vector<RequestPtr> confirmations;
    for (int r = 0; r < size(); ++r)
      if (r != rank()) confirmations.push_back(confirm(r));
    wait(confirmations);
  }
};

}  // namespace chorus
