// Recovering a small call's result from a survivor: one verdict for calls
// below the verdict round's size (CHORUS_AGREE), without the round's price.
//
// Terms:
//   replicated  a collective whose result is the same bytes on every rank:
//               allreduce, allgather, allgatherv, broadcast, and barrier
//               (whose result is only that every rank arrived)
//   kept        the result of a replicated call that finished here without
//               the round, copied aside (CallBoard::Slot::keep; the two
//               latest calls per communicator)
//   ask         what a rank that failed such a call on a peer failure sends
//               every peer still alive (Transport::recover_result)
//
// Without the round, a rank that dies in the middle of a call leaves the
// survivors that got all they needed from it finishing the call and the
// others failing it; so does a deadline that passes on one rank after every
// peer got its part. Steps, at a rank that failed replicated call k with
// CHORUS_ERR_PEER_FAILURE or CHORUS_ERR_TIMEOUT:
//   1. ask every live peer in the call about call k (TCP: an ask frame on
//      the control stream, answered by the peer's progress thread, so a
//      peer busy in user code answers too);
//   2. the peer seals its part of the communicator's calls (as vouching
//      does, CallBoard::Slot::vouch: no later part is done there, and one
//      found sealed fails with the asker's code) and answers whether its
//      part of k was done, with its kept result if so;
//   3. the first "finished" answer's result is copied in and the call
//      succeeds here; when every live peer answered "not finished", the call
//      fails as before.
// Why one verdict: a replicated call's part is marked done here
// (Slot::part_done) only after its result is kept, and a sealed slot marks
// none; so a rank finishes k on its own only before any rank asks it, and a
// rank that asks every live peer hears of it. Either some survivor finished
// k and every survivor that failed it adopts the result, or none did and
// none will. A peer that finished k cannot have finished k + 1, which needs
// the asking rank; so the two latest results cover every ask.
//
// A peer whose stream the network dropped while both lived is asked
// through its listener (transports/tcp/tcp_recover.cpp).
//
// Bytes on the wire: none on a call that succeeds (it costs a copy of the
// result, CHORUS_KEEP_RESULT at most: 128 KiB by default, cheaper than the
// round it replaces over a transport; plan.hpp decides which calls keep);
// on a failure, a frame header to each live peer and a header plus the
// result back from each.
//
// The same asks settle a call whose algorithm ends at a commit point
// (AlgorithmSpec::commit_point: reduce, gather, scatter and broadcast over a
// transport), of any size: every rank's result is in place before the first
// release, so each keeps an empty result, as a barrier does, and a
// "finished" answer is all an asker needs.
//
// Not covered here: other collectives whose results differ by rank, device
// buffers, and results larger than CHORUS_KEEP_RESULT; plan.hpp gives
// those the round. A survivor that finished k and died before it was asked
// takes its result with it (two failures).
#pragma once

#include <cstddef>
#include <optional>
#include <span>

#include "collectives/call.hpp"

namespace chorus {

// Where `call`'s result lies on this rank when survivors could hand it over
// (replicated, host memory, at most `max_bytes`: CHORUS_KEEP_RESULT);
// nullopt when not. A barrier's is an empty span (none when max_bytes is 0).
std::optional<std::span<std::byte>> replicated_result(const CollectiveCall& call,
                                                      const CallShape& shape,
                                                      std::size_t max_bytes);

}  // namespace chorus
