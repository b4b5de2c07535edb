#include "base/core/memcopy.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace chorus {

void copy_streaming(void* dst, const void* src, std::size_t bytes) {
#if defined(__x86_64__)
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  // Head: up to the destination's next 16-byte boundary.
  std::size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
  if (head > bytes) head = bytes;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  std::size_t blocks = bytes / 64;
  for (std::size_t i = 0; i < blocks; ++i, d += 64, s += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  std::memcpy(d, s, bytes % 64);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void streaming_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace chorus
