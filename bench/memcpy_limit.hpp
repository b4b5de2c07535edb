// The reference behind chorus-bench's limit(GB/s) and %limit columns: the
// single-thread memcpy bandwidth of this host at each size of the sweep, i.e.
// what one core can move through memory, as a yardstick for busbw. Also the
// page-touching allocator and the CPU binding the benches use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus_bench {

// A page-aligned buffer of at least `bytes` (64 when 0), every page written
// once; exits on failure. Release with std::free.
void* alloc_touched(size_t bytes);

// Binds the calling thread to `cpu`, best effort: an unpinned run is still a run.
void pin_to_cpu(int cpu);

// GB/s (10^9 bytes/s) for each size; *seconds: how long the whole table took.
std::vector<double> measure_memcpy(const std::vector<uint64_t>& sizes, double* seconds);

}  // namespace chorus_bench
