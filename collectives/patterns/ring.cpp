#include "collectives/patterns/ring.hpp"

#include "base/core/error.hpp"

namespace chorus::patterns {

Range chunk(std::size_t count, int parts, int index) {
  CHORUS_CHECK(parts > 0 && index >= 0 && index < parts, "chunk {} of {} parts", index, parts);
  const std::size_t p = static_cast<std::size_t>(parts);
  const std::size_t i = static_cast<std::size_t>(index);
  const std::size_t base = count / p;
  const std::size_t extra = count % p;
  // Chunks before i: i * base elements, plus one each for min(i, extra) of them.
  return Range{i * base + (i < extra ? i : extra), base + (i < extra ? 1 : 0)};
}

std::vector<Range> balanced_chunks(std::size_t count, int parts) {
  std::vector<Range> out;
  out.reserve(static_cast<std::size_t>(parts));
  for (int i = 0; i < parts; ++i) out.push_back(chunk(count, parts, i));
  return out;
}

std::vector<Range> equal_chunks(std::size_t per_part, int parts) {
  std::vector<Range> out;
  out.reserve(static_cast<std::size_t>(parts));
  for (int i = 0; i < parts; ++i)
    out.push_back(Range{static_cast<std::size_t>(i) * per_part, per_part});
  return out;
}

std::size_t segment_elems(std::size_t segment_bytes, std::size_t elem_size) {
  CHORUS_CHECK(elem_size > 0, "element size {}", elem_size);
  std::size_t n = segment_bytes / elem_size;
  return n > 0 ? n : 1;
}

std::size_t segment_count(std::size_t count, std::size_t seg_elems) {
  CHORUS_CHECK(seg_elems > 0, "segment of {} elements", seg_elems);
  if (count == 0) return 1;
  return (count + seg_elems - 1) / seg_elems;
}

std::size_t ring_round_elems(std::size_t count, std::size_t elem_size, std::size_t round_bytes) {
  CHORUS_CHECK(elem_size > 0, "element size {}", elem_size);
  if (round_bytes == 0 || count / kRingRoundsFrom < round_bytes / elem_size) return count;
  return segment_elems(round_bytes, elem_size);
}

Range segment(Range range, std::size_t seg_elems, std::size_t index) {
  CHORUS_CHECK(index < segment_count(range.count, seg_elems),
               "segment {} of a range of {} ({} per segment)", index, range.count, seg_elems);
  const std::size_t begin = index * seg_elems;
  const std::size_t n = range.count - begin < seg_elems ? range.count - begin : seg_elems;
  return Range{range.offset + begin, n};
}

ChainPosition chain_position(int rank, int size, int root) {
  CHORUS_CHECK(size > 0 && rank >= 0 && rank < size && root >= 0 && root < size,
               "rank {} root {} size {}", rank, root, size);
  const int rel = mod(rank - root, size);
  ChainPosition pos;
  if (rel > 0) pos.parent = ring_left(rank, size);
  if (rel < size - 1) pos.child = ring_right(rank, size);
  return pos;
}

int dissemination_rounds(int size) {
  CHORUS_CHECK(size > 0, "size {}", size);
  int rounds = 0;
  while ((1L << rounds) < size) ++rounds;
  return rounds;
}

}  // namespace chorus::patterns
