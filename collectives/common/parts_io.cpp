#include "collectives/common/parts_io.hpp"

#include <vector>

namespace chorus {

RequestPtr send_parts(CollectiveContext& ctx, int peer, const ScatteredBuffers& parts, bool inputs,
                      std::size_t offset, std::size_t length, std::byte* packed) {
  if (packed || length == 0) {
    parts.pack(offset, length, packed, !inputs);
    return ctx.send(peer, {packed, length});
  }
  std::vector<std::span<const std::byte>> pieces;
  parts.for_each(offset, length, [&](const std::byte* in, std::byte* out, std::size_t n) {
    pieces.emplace_back(inputs ? in : out, n);
  });
  return ctx.send_gather(peer, pieces);
}

RequestPtr recv_parts(CollectiveContext& ctx, int peer, const ScatteredBuffers& parts,
                      std::size_t offset, std::size_t length) {
  std::vector<std::span<std::byte>> pieces;
  parts.for_each(offset, length, [&](const std::byte*, std::byte* out, std::size_t n) {
    pieces.emplace_back(out, n);
  });
  return ctx.recv_scatter(peer, pieces);
}

}  // namespace chorus
