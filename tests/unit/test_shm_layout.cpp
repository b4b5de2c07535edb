// The shared-memory pipeline's piece sizes: how host_shm_layout sizes the
// segment's pieces (lib/comm/host_domain.hpp), and which piece an allreduce
// of a given size takes (shm::call_piece_bytes).
#include <catch2/catch.hpp>

#include <cstddef>

#include "base/core/config.hpp"
#include "collectives/shm/domain.hpp"
#include "lib/comm/host_domain.hpp"

using namespace chorus;

TEST_CASE("shm layout: pieces per rank count and cores", "[shm]") {
  const Config automatic;  // CHORUS_SHM_CHUNK=auto
  // Every rank on its own core: 256K slots, one piece size for every call.
  shm::Layout two = host_shm_layout(automatic, 2, 2);
  CHECK(two.piece_bytes == (128u << 10));
  CHECK(two.base_piece() == two.piece_bytes);
  // Ranks outnumber cores: 512K slots, and pieces that may grow to a 2M slot.
  shm::Layout four = host_shm_layout(automatic, 4, 2);
  CHECK(four.base_piece() == (128u << 10));
  CHECK(four.piece_bytes == (512u << 10));
  // ... with the segment (ranks x slots x slot) within 32 MiB.
  for (int ranks : {3, 4, 8, 16, 64}) {
    INFO(ranks << " ranks on 2 cores");
    shm::Layout l = host_shm_layout(automatic, ranks, 2);
    CHECK(l.piece_bytes >= l.base_piece());
    CHECK(l.piece_bytes % 4096 == 0);
    CHECK(l.base_piece() % 4096 == 0);
    if (l.piece_bytes > l.base_piece())
      CHECK(static_cast<std::size_t>(ranks) * static_cast<std::size_t>(l.slots) * l.slot_bytes() <=
            (32u << 20));
  }
  // A chunk the user set is the only piece.
  Config fixed;
  fixed.shm_chunk_bytes = 64 << 10;
  shm::Layout set = host_shm_layout(fixed, 4, 2);
  CHECK(set.piece_bytes == (64u << 10));
  CHECK(set.base_piece() == (64u << 10));
}

TEST_CASE("shm layout: an allreduce's piece keeps kMinRounds rounds within the bounds", "[shm]") {
  shm::Layout l;
  l.ranks = 4;
  l.base_piece_bytes = 128 << 10;
  l.piece_bytes = 512 << 10;
  const std::size_t per_round = 4 * shm::kMinRounds;
  // Small calls: the base piece.
  CHECK(shm::call_piece_bytes(l, 64) == (128u << 10));
  CHECK(shm::call_piece_bytes(l, 2u << 20) == (128u << 10));
  // Large calls: the largest piece.
  CHECK(shm::call_piece_bytes(l, 8u << 20) == (512u << 10));
  CHECK(shm::call_piece_bytes(l, 1u << 30) == (512u << 10));
  // In between: exactly kMinRounds rounds, pieces a multiple of 64.
  for (std::size_t total : {std::size_t{2u << 20} + 64, std::size_t{3u << 20} + 17,
                            std::size_t{5u << 20}, std::size_t{8u << 20} - 1}) {
    INFO("total " << total);
    const std::size_t piece = shm::call_piece_bytes(l, total);
    CHECK(piece % 64 == 0);
    CHECK(piece > l.base_piece());
    CHECK(piece <= l.piece_bytes);
    const std::size_t rounds = (total + piece * 4 - 1) / (piece * 4);
    CHECK(rounds == shm::kMinRounds);
    CHECK(piece - 64 < (total + per_round - 1) / per_round);  // the smallest such multiple
  }
  // One piece size (base 0 or equal): every call takes it.
  shm::Layout one;
  one.ranks = 4;
  one.piece_bytes = 64 << 10;
  for (std::size_t total : {std::size_t{1}, std::size_t{1u << 20}, std::size_t{1u << 30}})
    CHECK(shm::call_piece_bytes(one, total) == (64u << 10));
}
