// Buffers for tests that must see every element the library failed to write
// and every byte it wrote outside the range it was given.
//   Guarded<T>: `count` elements between two guard zones of kGuardBytes;
//     guard_damage() says whether any byte of them changed. Every buffer's
//     guard bytes follow a pattern of its own, so that bytes copied from one
//     buffer's guard into another's (an overrun reading past a send buffer
//     and writing past a receive buffer) still show.
//   unlike(x): a value that differs from x in every bit (bitwise NOT), to
//     pre-fill an output element whose expected value is x: an element the
//     library never writes can then never pass, whatever x is (a zero sum
//     included; for floats it is a NaN or a value of the other sign).
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace chorus::test {

template <typename T>
T unlike(T x) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &x, sizeof(T));
  for (auto& b : bytes) b = static_cast<unsigned char>(~b);
  T out;
  std::memcpy(&out, bytes, sizeof(T));
  return out;
}

template <typename T>
class Guarded {
 public:
  static constexpr std::size_t kGuardBytes = 256;

  Guarded() : Guarded(0) {}
  explicit Guarded(std::size_t count)
      : count_(count), seed_(next_seed()), storage_(2 * guard_elements() + count) {
    auto* before = reinterpret_cast<unsigned char*>(storage_.data());
    auto* after = reinterpret_cast<unsigned char*>(data() + count_);
    for (std::size_t i = 0; i < zone(); ++i) {
      before[i] = guard_byte(i);
      after[i] = guard_byte(zone() + i);
    }
  }

  T* data() { return storage_.data() + guard_elements(); }
  const T* data() const { return storage_.data() + guard_elements(); }
  std::size_t size() const { return count_; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }

  // "" when both guard zones are intact; else where the first write landed.
  std::string guard_damage(const std::string& what) const {
    const auto* before = reinterpret_cast<const unsigned char*>(storage_.data());
    const auto* after = reinterpret_cast<const unsigned char*>(data() + count_);
    for (std::size_t i = zone(); i-- > 0;)  // nearest the buffer first
      if (before[i] != guard_byte(i))
        return fmt::format("{}: byte {} before the buffer was overwritten", what, zone() - i);
    for (std::size_t i = 0; i < zone(); ++i)
      if (after[i] != guard_byte(zone() + i))
        return fmt::format("{}: byte {} after the buffer's end was overwritten", what, i);
    return "";
  }

 private:
  static constexpr std::size_t guard_elements() {
    return (kGuardBytes + sizeof(T) - 1) / sizeof(T);
  }
  static constexpr std::size_t zone() { return guard_elements() * sizeof(T); }
  static uint32_t next_seed() {
    static std::atomic<uint32_t> buffers{0};
    return buffers.fetch_add(1) * 0x9E3779B9u + 0xA5;
  }
  unsigned char guard_byte(std::size_t i) const {
    return static_cast<unsigned char>((seed_ + i * 131) ^ (seed_ >> 8));
  }

  std::size_t count_;
  uint32_t seed_;
  std::vector<T> storage_;
};

}  // namespace chorus::test
