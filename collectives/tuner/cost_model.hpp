// The cost model that ranks algorithms: a message step costs alpha, every
// byte on the critical path 1/beta, every byte reduced gamma; through shared
// memory a synchronisation costs shm_alpha and a byte copied shm_beta.
// Until measured link parameters arrive (calibration data), defaults() gives
// what loopback TCP and the shared-memory pipeline show on these machines:
// both alphas grow when ranks outnumber cores, because then every step waits
// for a sleeping rank to be scheduled.
#pragma once

#include <cstddef>

namespace chorus {

struct CostModel {
  double alpha_us = 10;                // per point-to-point message step
  double us_per_byte = 0.0004;         // 1/beta: ~2.5 GB/s
  double reduce_us_per_byte = 0.0002;  // gamma: ~5 GB/s
  double shm_alpha_us = 0.3;           // per synchronisation through shared memory
  double shm_us_per_byte = 0.0001;     // a byte copied through the segment: ~10 GB/s
  bool oversubscribed = false;         // more ranks on this host than cores
  static CostModel defaults(int ranks_on_host, int cores);
};

// Segment size of the ring pipelines for a call of `bytes` per rank:
// `configured` when the user set one; else about 16 segments per chunk, within
// [256K, 1M], so that transfer and reduction overlap even for a few MiB (while
// segments stay large enough that per-message costs do not dominate). When
// ranks outnumber cores every extra step costs a wake-up: 1M.
std::size_t ring_segment_bytes(std::size_t bytes, int ranks, const CostModel& model,
                               std::size_t configured);

// ceil(log2(n)) for n >= 1: rounds of tree and dissemination patterns.
int log2_ceil(int n);

}  // namespace chorus
