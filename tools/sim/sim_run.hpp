// chorus-sim's runner: a world of simulated hosts (one thread per rank, each
// with its SimTransport, world team and, across hosts, the Hierarchy that a
// communicator would build), over which the registry's real allreduce
// algorithms run one call after another; each call's predicted time is when
// its last rank finished on the virtual clock.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "collectives/registry.hpp"
#include "tools/sim/net_clock.hpp"

namespace chorus::sim {

struct World {
  std::vector<int> host_of_rank;  // host number of each rank
  NetParams net;
  int cores_per_host = 0;  // what the tuner's cost model is told (0: ranks per host)
  // The most bytes a rank's buffer really holds: a larger call runs on
  // buffers of bytes / scale (scale a power of two) whose messages each
  // stand for scale times their size (SimTransport).
  std::size_t max_real_bytes = 256 << 10;
  // Segment size of the pipelines (0: as the communicator would choose).
  std::size_t segment_bytes = 0;
};

// Host of each of `ranks` ranks on `hosts` hosts: "slot" fills host after
// host (ranks * h / hosts), "node" deals round-robin (rank % hosts).
std::vector<int> place(int ranks, int hosts, const std::string& placement);

struct AlgoTime {
  const AlgorithmSpec* spec = nullptr;
  std::string refusal;  // set: the algorithm does not run this call
  std::string error;    // set: it ran and failed
  double time_us = 0;
  double estimate_us = 0;  // the tuner's estimate
};

struct SizeResult {
  std::size_t bytes = 0;
  std::size_t scale = 1;
  std::vector<AlgoTime> algos;           // in the order asked
  const AlgorithmSpec* tuned = nullptr;  // select_algorithm's choice
  const AlgoTime* best() const;
  const AlgoTime* of(const AlgorithmSpec* spec) const;
};

// Runs every algorithm of `algos` (allreduce, float32 sum) at every size of
// `sizes` (bytes per rank), and asks the tuner for its choice at each size.
std::vector<SizeResult> simulate_allreduce(const World& world,
                                           const std::vector<std::size_t>& sizes,
                                           const std::vector<const AlgorithmSpec*>& algos);

}  // namespace chorus::sim
