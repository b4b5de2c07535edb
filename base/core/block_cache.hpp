// An allocator that keeps freed blocks on the thread that freed them, for
// that thread's next allocation of the same type: a deeper glibc tcache
// (which keeps 7 blocks per size) for objects made and dropped by the
// thousand per training step, such as the fusion engine's requests, where
// malloc and free otherwise cost more than the rest of a fused call.
//
// A block freed on one thread is reused only by that thread, so no lock is
// needed; a thread keeps at most kKeptBlocks and frees the rest, and frees
// what it kept when it exits. Under AddressSanitizer nothing is kept, so
// that a use after free is still reported.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace chorus {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr std::size_t kKeptBlocks = 0;
#else
inline constexpr std::size_t kKeptBlocks = 4096;
#endif

template <typename T>
class BlockCache {
 public:
  // A kept block, or nullptr.
  static T* take() {
    auto& kept = blocks();
    if (kept.empty()) return nullptr;
    T* block = kept.back();
    kept.pop_back();
    return block;
  }
  // Keeps `block` for this thread; false when full (the caller frees it).
  static bool keep(T* block) {
    auto& kept = blocks();
    if (kept.size() >= kKeptBlocks) return false;
    kept.push_back(block);
    return true;
  }

 private:
  struct Kept : std::vector<T*> {
    ~Kept() {
      for (T* block : *this) std::allocator<T>().deallocate(block, 1);
    }
  };
  static Kept& blocks() {
    thread_local Kept kept;
    return kept;
  }
};

template <typename T>
struct CachingAllocator {
  using value_type = T;
  CachingAllocator() = default;
  template <typename U>
  CachingAllocator(const CachingAllocator<U>&) {}  // NOLINT(google-explicit-constructor)

  T* allocate(std::size_t n) {
    if (n == 1)
      if (T* block = BlockCache<T>::take()) return block;
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* block, std::size_t n) {
    if (n == 1 && BlockCache<T>::keep(block)) return;
    std::allocator<T>().deallocate(block, n);
  }
  template <typename U>
  bool operator==(const CachingAllocator<U>&) const {
    return true;
  }
};

}  // namespace chorus
