// The link probe: at chorus_init of a job that spans hosts, the host leaders
// measure the link between hosts, so that the cost model chooses algorithms
// for the network the job has rather than for CHORUS_NET_*'s defaults.
//
// The leaders form a ring (leader i sends to i+1, receives from i-1), on the
// probe's own tag (link.hpp), and run, bounded by one deadline:
//   1. a warm-up hop and a pilot block (256 KiB) to the next leader, whose
//      rate sizes step 3;
//   2. latency: a token goes around the ring R times; each leader times the
//      R-1 rounds after its first receipt: alpha = elapsed / ((R-1) * H).
//      The token carries the slowest pilot rate, so all agree on step 3's size;
//   3. bandwidth: every leader sends a block (256 KiB to 4 MiB, about 40 ms
//      of the slowest pilot rate) to the next while receiving the previous
//      one's, as a train of 16 messages, twice; gbps = the bits after the
//      first arrival / the time from it to the last (the best train).
// Each leader publishes what it measured (or that it failed) in the store;
// every rank reads all of them and takes the worst link (largest alpha,
// smallest rate), so every rank builds the same cost model: selection must
// not depend on the rank. A failure anywhere gives every rank the configured
// values, with a warning.
//
// No probe runs when the job is on one host, when CHORUS_LINK_PROBE=0, when
// the user set CHORUS_NET_ALPHA_US or CHORUS_NET_GBPS, or when the link's
// values were given before the first communicator (apply_network: a tuning
// file).
#pragma once

#include <string>

#include "base/bootstrap/store.hpp"
#include "base/core/completion.hpp"
#include "base/core/config.hpp"
#include "base/core/deadline.hpp"
#include "base/topology/host.hpp"
#include "collectives/team.hpp"
#include "lib/comm/link.hpp"

namespace chorus {

// What one leader measured.
struct LinkMeasurement {
  double alpha_us = 0;
  double gbps = 0;
  double ms = 0;          // the probe's duration on this leader
  std::size_t bytes = 0;  // the bandwidth block
  int rounds = 0;         // of the latency token
  double pilot_gbps = 0;  // the slowest leader's pilot rate (sizes the block)
};

// Steps 1-3 on a leader. `probe` is the leaders' team on the probe's tag;
// `leftovers` receives the buffers when a wait fails (the transport may
// still use them). Throws IoError on failure or at the deadline.
LinkMeasurement measure_link_ring(const Team& probe, const Deadline& deadline, Spin spin,
                                  std::shared_ptr<void>& leftovers);

// The link between hosts for the communicator whose ranks are placed by
// `hosts`: configured, or probed (collective over every rank: leaders
// measure, everyone reads). `probe` is the leaders' team on the probe tag,
// null off the leaders; `transport` tells of a dead leader while waiting for
// its result. Never throws: a failed probe gives the configured values.
NetworkLink resolve_network(const Config& config, const topology::HostMap& hosts, const Team* probe,
                            Transport& transport, Store& store, const std::string& key_prefix,
                            std::shared_ptr<void>& leftovers);

// The link's values known before the first communicator is built (a tuning
// file): no probe runs, and `source` says where they came from. Throws
// UsageError for values that are not positive.
void apply_network(Link& link, double alpha_us, double gbps, const std::string& source);

// The configured values (CHORUS_NET_*, or their defaults), with their source.
NetworkLink configured_network(const Config& config);

}  // namespace chorus
