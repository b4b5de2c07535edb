// The buffers of an allreduce whose input and output lie in many separate
// parts: the fusion engine's bucket of tensors that were allocated apart.
//
// Terms:
//   part      one tensor's input and output (the same pointer: in place) and
//             its length in bytes
//   offset    a byte of the call, counting through the parts in order, as
//             if they lay back to back in one buffer
//
// An algorithm that reads its input and writes its output piece by piece
// takes the parts as they are (AlgorithmSpec::takes_parts): the
// shared-memory pipeline copies a piece that spans several parts from each
// in turn, and the ring and Rabenseifner's exchanges send a segment that
// does as one gather send and receive one as one scatter receive
// (common/parts_io.hpp). Any other algorithm runs the call packed into one
// buffer (Communicator::run): two more copies of the whole call, which for
// 1000 tensors of 4 KiB made a fused step 3-4x slower than the same tensors
// lying back to back over shared memory, 1.8x over TCP (docs/benchmarks.md,
// "Tensors apart").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

namespace chorus {

class ScatteredBuffers {
 public:
  struct Part {
    const std::byte* send = nullptr;
    std::byte* recv = nullptr;
    std::size_t bytes = 0;
  };

  void clear();
  // Appends a part; one of no bytes is left out.
  void add(const void* send, void* recv, std::size_t bytes);

  std::size_t bytes() const { return total_; }
  std::size_t size() const { return parts_.size(); }
  // Every part's output is its input.
  bool in_place() const { return in_place_; }

  // The index of the part that holds byte `offset` (< bytes()).
  std::size_t part_at(std::size_t offset) const;
  // The call's bytes [offset, offset + length) when one part holds them all:
  // that part shifted to them; otherwise a part with null pointers.
  Part within(std::size_t offset, std::size_t length) const;
  // fn(send, recv, bytes) for each stretch of [offset, offset + length) that
  // lies in one part, in order.
  template <typename Fn>
  void for_each(std::size_t offset, std::size_t length, Fn&& fn) const {
    if (length == 0) return;
    for (std::size_t i = part_at(offset); length > 0; ++i) {
      const Part& p = parts_[i];
      const std::size_t into = offset - starts_[i];
      const std::size_t n = std::min(p.bytes - into, length);
      fn(p.send + into, p.recv + into, n);
      offset += n;
      length -= n;
    }
  }

  // The call's bytes [offset, offset + length) of the parts' inputs (or
  // outputs), back to back into dst.
  void pack(std::size_t offset, std::size_t length, std::byte* dst, bool outputs = false) const {
    for_each(offset, length, [&](const std::byte* in, std::byte* out, std::size_t n) {
      std::memcpy(dst, outputs ? out : in, n);
      dst += n;
    });
  }
  // src (length bytes) into the parts' outputs of the call's bytes
  // [offset, offset + length).
  void unpack(std::size_t offset, std::size_t length, const std::byte* src) const {
    for_each(offset, length, [&](const std::byte*, std::byte* out, std::size_t n) {
      std::memcpy(out, src, n);
      src += n;
    });
  }
  // The whole call: every part's input into dst, src into every output.
  void pack(std::byte* dst) const { pack(0, total_, dst); }
  void unpack(const std::byte* src) const { unpack(0, total_, src); }

 private:
  std::vector<Part> parts_;
  std::vector<std::size_t> starts_;  // the offset of each part's first byte
  std::size_t total_ = 0;
  bool in_place_ = true;
};

}  // namespace chorus
