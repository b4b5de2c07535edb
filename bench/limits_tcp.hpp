// chorus-limits' loopback TCP column: what this host's loopback allows a
// 2-rank allreduce over TCP.
//
// Two threads on two CPUs (a rank each) exchange S bytes of float32 each way
// over one loopback TCP connection, in pieces of 1 MiB, each piece sent and
// received at once. Every rank of a 2-rank ring allreduce sends and receives
// S bytes, so the exchange's GB/s (S / time) bounds its busbw. On a machine
// whose ranks have a core each and nothing else, the exchange is CPU-bound:
// both socket copies of each byte (into the kernel and out of it) run on the
// threads' own cores.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus_bench {

// GB/s per thread (the slower of the two) for `reps` exchanges of `bytes`
// (rounded down to whole floats) over loopback TCP. Each thread checks what
// it received against what its peer sent and exits with status 1, saying
// so, on any difference.
double exchange_tcp(std::size_t bytes, int64_t reps, const std::vector<int>& cpus);

}  // namespace chorus_bench
