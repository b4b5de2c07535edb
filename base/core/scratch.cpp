#include "base/core/scratch.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include "base/core/error.hpp"

namespace chorus {

void ScratchPool::Free::operator()(std::byte* p) const {
  std::free(p);
}

std::span<std::byte> ScratchPool::get(int slot, std::size_t bytes) {
  CHORUS_CHECK(slot >= 0 && slot < 64, "scratch slot {} out of range", slot);
  if (static_cast<std::size_t>(slot) >= buffers_.size()) {
    buffers_.resize(slot + 1);
    owners_.resize(slot + 1);
  }
  Buffer& b = buffers_[slot];
  if (b.size < bytes) {
    // Grow geometrically so a sweep of sizes does not reallocate every time.
    std::size_t size = std::max<std::size_t>(bytes, b.size * 2);
    size = (size + 4095) & ~std::size_t(4095);
    void* p = std::aligned_alloc(4096, size);
    if (!p)
      throw Error(CHORUS_ERR_NO_MEMORY, fmt::format("cannot allocate {} bytes of scratch", size));
    std::memset(p, 0, size);  // touch every page now, not on the hot path
    owners_[slot].reset(static_cast<std::byte*>(p));
    b.data = static_cast<std::byte*>(p);
    b.size = size;
  }
  return {b.data, bytes};
}

std::size_t ScratchPool::total_bytes() const {
  std::size_t total = 0;
  for (const auto& b : buffers_) total += b.size;
  return side_ ? total + side_->total_bytes() : total;
}

ScratchPool& ScratchPool::side() {
  if (!side_) side_ = std::make_unique<ScratchPool>();
  return *side_;
}

}  // namespace chorus
