// The verdict round (CHORUS_AGREE): a call returns success only once every
// rank still alive has its result, so that a rank's death in the middle of
// a call, or just after it, leaves every survivor with the same verdict.
//
// Terms:
//   have       a zero-byte message (or, over shared memory, an arrival on
//              the domain's barrier counter) that a rank sends once its own
//              part of the call is done and its result is in place
//   gone       a peer the transport knows has died or left, while the
//              failure that says so still spares this call (Spared): it
//              will send nothing more, and whatever it did send is here
//
// Steps, after the call's own algorithm returned on this rank:
//   1. send a have to every other rank (or publish the arrival);
//   2. wait for a have from every other rank that is not gone;
//   3. check the call once more: a failure notice that came meanwhile
//      (a peer failed this call after all) fails it here too.
// A rank that could not finish the call sends no have, so no survivor can
// succeed while another fails; a rank that dies sends nothing more, so it
// is not waited for, and whether its have came first does not matter.
//
// Bytes on the wire: over a transport, n - 1 zero-byte messages sent and
// received per rank (a frame header each over TCP); over shared memory one
// counter written and n read.
//
// A deadline that passes in step 2 is not yet a verdict: this rank's have
// is sent, so a peer may finish the call. The peers still awaited are asked
// whether their part is done (CollectiveContext::extend_deadline, sealing
// it where not): if every one's is, their haves are on their way and the
// wait goes on; if one's is not, that peer will not do it, and the call
// fails everywhere.
//
// Still open: two failures within one call (a rank that fails the call and
// then dies before its notice reaches every peer), and a peer asked on a
// deadline that is alive but answers nothing (a process stopped whole). A
// connection the network drops between two live ranks is settled by the
// probe (tcp_probe.cpp).
#pragma once

#include "collectives/context.hpp"

namespace chorus {

void agree_on_verdict(CollectiveContext& ctx);

}  // namespace chorus
