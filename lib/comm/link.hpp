// What the communicators made from one chorus_init share on this rank: the
// transport (the connections to every rank of the job), the store, and the
// numbering of their tag spaces. chorus_comm_split makes a communicator over
// the same link, so it needs no new connections; the transport closes when
// the last communicator on it is destroyed.
//
// Tags: a communicator's id (0 for chorus_init's) picks its tag space, so
// communicators that share ranks never match each other's messages:
//   collectives of team t (1 world, 2 host, 3 leaders): (id << 20) | t
//   (4-7: the hierarchy's teams; 8: the link probe among the host leaders)
//   point-to-point with user tag u (u < 2^20):           bit 31 | (id << 20) | u
// Ids are agreed at each split: every member proposes the lowest id none of
// its communicators used, the child takes the largest proposal, and every
// member moves past it. Two communicators that share a rank therefore never
// share an id (2047 communicators at most per rank).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/bootstrap/store.hpp"
#include "transports/transport.hpp"

namespace chorus {

inline constexpr uint32_t kMaxCommId = (1u << 11) - 1;
inline constexpr uint32_t kMaxUserTag = (1u << 20) - 1;
inline constexpr uint32_t team_tag(uint32_t comm_id, uint32_t team) {
  return (comm_id << 20) | team;
}
inline constexpr uint32_t p2p_tag(uint32_t comm_id, uint32_t user_tag) {
  return kPointToPointTag | (comm_id << 20) | user_tag;
}

// The link between hosts as the cost model sees it (CostModel::set_network),
// the same on every rank of a job. Measured once per link, at chorus_init
// (link_probe.hpp); split communicators inherit it.
struct NetworkLink {
  double alpha_us = 30;  // a message step between hosts
  double gbps = 10;      // a host's link
  // Where the values come from: "probed", "CHORUS_NET_ALPHA_US/CHORUS_NET_GBPS",
  // "default", or what apply_network was told (a tuning file).
  std::string source = "default";
  double probe_ms = 0;  // how long the probe took on this rank; 0: none ran
  int hosts = 1;        // the hosts the probe ran between
};

struct Link {
  // Buffers of a probe that gave up with messages outstanding: the transport
  // may still write into them, so they are freed after it (declared first,
  // destroyed last).
  std::shared_ptr<void> probe_leftovers;
  std::unique_ptr<Transport> transport;
  std::shared_ptr<Store> store;  // shared-memory segments of split communicators meet here
  std::string store_prefix;      // this job's namespace in the store ("comm1/")
  std::string job_token;         // names shared-memory segments
  std::string tcp_bind_host;     // the address this rank's TCP connections listen on

  std::mutex mu;              // guards next_comm_id
  uint32_t next_comm_id = 1;  // the lowest id no communicator on this rank has used
  std::atomic<int> users{0};  // live communicators on this link
  // Set by the first communicator on the link (or before it, by
  // apply_network); read by the later ones. Under mu.
  std::optional<NetworkLink> network;
  // The last call each communicator finished, and the one it is in, are on
  // transport->board(): a failure here spares the finished ones at the peers
  // (Spared), on every communicator of the link, since they all fail together.
};

}  // namespace chorus
