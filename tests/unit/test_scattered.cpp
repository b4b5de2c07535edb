// ScatteredBuffers (collectives/scattered.hpp): where a call's byte lies
// among its parts, the stretches of a range, packing and unpacking.
#include <catch2/catch.hpp>

#include <cstddef>
#include <numeric>
#include <tuple>
#include <vector>

#include "base/core/error.hpp"
#include "collectives/scattered.hpp"

using chorus::ScatteredBuffers;

namespace {

// Parts of 3, 5 and 8 bytes over separate arrays; the second in place.
struct Three {
  std::vector<std::byte> in0 = std::vector<std::byte>(3), out0 = std::vector<std::byte>(3),
                         both1 = std::vector<std::byte>(5), in2 = std::vector<std::byte>(8),
                         out2 = std::vector<std::byte>(8);
  ScatteredBuffers parts;
  Three() {
    parts.add(in0.data(), out0.data(), 3);
    parts.add(both1.data(), both1.data(), 0);  // left out
    parts.add(both1.data(), both1.data(), 5);
    parts.add(in2.data(), out2.data(), 8);
  }
};

}  // namespace

TEST_CASE("scattered buffers: parts, offsets and the range within one part", "[scattered]") {
  Three t;
  const ScatteredBuffers& p = t.parts;
  REQUIRE(p.size() == 3);
  CHECK(p.bytes() == 16);
  CHECK_FALSE(p.in_place());
  CHECK(p.part_at(0) == 0);
  CHECK(p.part_at(2) == 0);
  CHECK(p.part_at(3) == 1);
  CHECK(p.part_at(7) == 1);
  CHECK(p.part_at(8) == 2);
  CHECK(p.part_at(15) == 2);
  CHECK_THROWS_AS(p.part_at(16), chorus::InvariantError);

  const auto inside = p.within(4, 3);  // bytes 1-3 of the in-place part
  CHECK(inside.send == t.both1.data() + 1);
  CHECK(inside.recv == t.both1.data() + 1);
  CHECK(inside.bytes == 3);
  CHECK(p.within(2, 2).send == nullptr);  // spans the first two parts
  CHECK(p.within(8, 8).recv == t.out2.data());

  std::vector<std::tuple<const std::byte*, std::byte*, std::size_t>> seen;
  p.for_each(1, 12,
             [&](const std::byte* s, std::byte* r, std::size_t n) { seen.emplace_back(s, r, n); });
  REQUIRE(seen.size() == 3);
  CHECK(seen[0] == std::make_tuple(static_cast<const std::byte*>(t.in0.data() + 1),
                                   t.out0.data() + 1, std::size_t{2}));
  CHECK(seen[1] == std::make_tuple(static_cast<const std::byte*>(t.both1.data()), t.both1.data(),
                                   std::size_t{5}));
  CHECK(seen[2] == std::make_tuple(static_cast<const std::byte*>(t.in2.data()), t.out2.data(),
                                   std::size_t{5}));
  seen.clear();
  p.for_each(5, 0,
             [&](const std::byte* s, std::byte* r, std::size_t n) { seen.emplace_back(s, r, n); });
  CHECK(seen.empty());
}

TEST_CASE("scattered buffers: pack reads every input, unpack writes every output", "[scattered]") {
  Three t;
  for (std::size_t i = 0; i < 3; ++i) t.in0[i] = std::byte(i);
  for (std::size_t i = 0; i < 5; ++i) t.both1[i] = std::byte(10 + i);
  for (std::size_t i = 0; i < 8; ++i) t.in2[i] = std::byte(20 + i);
  std::vector<std::byte> packed(16);
  t.parts.pack(packed.data());
  const std::vector<int> want = {0, 1, 2, 10, 11, 12, 13, 14, 20, 21, 22, 23, 24, 25, 26, 27};
  for (std::size_t i = 0; i < 16; ++i) CHECK(std::to_integer<int>(packed[i]) == want[i]);

  for (std::size_t i = 0; i < 16; ++i) packed[i] = std::byte(100 + i);
  t.parts.unpack(packed.data());
  for (std::size_t i = 0; i < 3; ++i) CHECK(std::to_integer<int>(t.out0[i]) == 100 + int(i));
  for (std::size_t i = 0; i < 5; ++i) CHECK(std::to_integer<int>(t.both1[i]) == 103 + int(i));
  for (std::size_t i = 0; i < 8; ++i) CHECK(std::to_integer<int>(t.out2[i]) == 108 + int(i));
  CHECK(std::to_integer<int>(t.in0[0]) == 0);  // inputs apart from outputs untouched

  // A range across the parts' edges: bytes [2, 10), from the outputs, then
  // back into them.
  std::vector<std::byte> range(8);
  t.parts.pack(2, 8, range.data(), /*outputs=*/true);
  for (std::size_t i = 0; i < 8; ++i) CHECK(std::to_integer<int>(range[i]) == 102 + int(i));
  for (std::size_t i = 0; i < 8; ++i) range[i] = std::byte(200 + i);
  t.parts.unpack(2, 8, range.data());
  CHECK(std::to_integer<int>(t.out0[1]) == 101);  // before the range
  CHECK(std::to_integer<int>(t.out0[2]) == 200);
  for (std::size_t i = 0; i < 5; ++i) CHECK(std::to_integer<int>(t.both1[i]) == 201 + int(i));
  CHECK(std::to_integer<int>(t.out2[1]) == 207);
  CHECK(std::to_integer<int>(t.out2[2]) == 110);  // after the range

  t.parts.clear();
  CHECK(t.parts.bytes() == 0);
  CHECK(t.parts.size() == 0);
  t.parts.add(t.both1.data(), t.both1.data(), 5);
  CHECK(t.parts.in_place());
}
