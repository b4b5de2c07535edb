// Copies for the shared-memory collectives.
//
// copy_streaming writes with non-temporal stores: the destination lines are
// not read first (no read-for-ownership) and do not evict the cache-resident
// segment. It pays for large outputs that the caller will not read back at
// once (half the memory traffic of a cached copy's destination); for small
// ones a plain memcpy keeps the result in cache.
#pragma once

#include <cstddef>

namespace chorus {

void copy_streaming(void* dst, const void* src, std::size_t bytes);
// Orders earlier streaming stores before later stores (sfence).
void streaming_fence();

}  // namespace chorus
