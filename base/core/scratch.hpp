// Scratch memory that lives with a communicator. Buffers grow on demand and are
// kept; new pages are touched once when a buffer grows (a fresh 4 KiB page costs
// about 11 us on first touch here), never per call. Not thread-safe: one
// collective runs at a time on a communicator, and a thread that runs beside
// it (the pipelined stages of the hierarchical algorithms) takes side().
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace chorus {

class ScratchPool {
 public:
  // A buffer of at least `bytes`, 64-byte aligned, distinct for each slot.
  // The span stays valid until the next get() of the same slot.
  std::span<std::byte> get(int slot, std::size_t bytes);
  // This and the side pool's.
  std::size_t total_bytes() const;
  // A pool of its own for one thread that runs beside the user of this one,
  // kept as long as this one (so its pages too are touched once). Create it
  // before that thread starts: the first call makes it.
  ScratchPool& side();

 private:
  struct Buffer {
    std::byte* data = nullptr;
    std::size_t size = 0;
  };
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::vector<std::unique_ptr<std::byte, Free>> owners_;
  std::vector<Buffer> buffers_;
  std::unique_ptr<ScratchPool> side_;
};

}  // namespace chorus
