// Pure rank arithmetic of collectives/patterns/ring.hpp, with no transport.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "collectives/patterns/recursive_doubling.hpp"
#include "collectives/patterns/ring.hpp"
#include "collectives/patterns/tree.hpp"

using namespace chorus::patterns;

TEST_CASE("ring neighbours", "[patterns]") {
  for (int n = 1; n <= 9; ++n) {
    for (int r = 0; r < n; ++r) {
      CHECK(ring_right(r, n) == (r + 1) % n);
      CHECK(ring_left(ring_right(r, n), n) == r);
    }
  }
  CHECK(mod(-1, 5) == 4);
  CHECK(mod(-11, 5) == 4);
  CHECK(mod(7, 5) == 2);
}

TEST_CASE("balanced chunks cover the range exactly", "[patterns]") {
  for (std::size_t count : {0, 1, 2, 7, 8, 9, 131, 1000003}) {
    for (int parts = 1; parts <= 9; ++parts) {
      INFO("count " << count << " parts " << parts);
      auto chunks = balanced_chunks(count, parts);
      REQUIRE(chunks.size() == static_cast<std::size_t>(parts));
      std::size_t next = 0;
      for (int i = 0; i < parts; ++i) {
        const Range c = chunks[static_cast<std::size_t>(i)];
        CHECK(c == chunk(count, parts, i));
        CHECK(c.offset == next);
        const std::size_t want =
            count / parts + (static_cast<std::size_t>(i) < count % parts ? 1 : 0);
        CHECK(c.count == want);
        next = c.end();
      }
      CHECK(next == count);
    }
  }
  auto eq = equal_chunks(5, 3);
  REQUIRE(eq.size() == 3);
  CHECK(eq[2] == Range{10, 5});
}

TEST_CASE("segments cover a chunk", "[patterns]") {
  CHECK(segment_elems(64, 4) == 16);
  CHECK(segment_elems(64, 8) == 8);
  CHECK(segment_elems(1, 8) == 1);
  CHECK(segment_elems(0, 2) == 1);
  CHECK(segment_count(0, 16) == 1);
  CHECK(segment(Range{5, 0}, 16, 0) == Range{5, 0});
  for (std::size_t count : {1, 2, 15, 16, 17, 131, 4096}) {
    for (std::size_t per : {1, 3, 16, 1000}) {
      const Range range{1000, count};
      const std::size_t k = segment_count(count, per);
      CHECK(k == (count + per - 1) / per);
      std::size_t next = range.offset;
      for (std::size_t i = 0; i < k; ++i) {
        const Range s = segment(range, per, i);
        CHECK(s.offset == next);
        CHECK(s.count >= 1);
        CHECK(s.count <= per);
        if (i + 1 < k) CHECK(s.count == per);
        next = s.end();
      }
      CHECK(next == range.end());
    }
  }
}

TEST_CASE("ring reduce-scatter schedule leaves chunk r fully reduced on rank r", "[patterns]") {
  for (int n = 1; n <= 9; ++n) {
    // have[r][c]: bit mask of the ranks whose contribution rank r's copy of chunk c holds.
    std::vector<std::vector<uint32_t>> have(n, std::vector<uint32_t>(n));
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < n; ++c) have[r][c] = 1u << r;
    for (int s = 0; s < ring_steps(n); ++s) {
      auto before = have;
      for (int r = 0; r < n; ++r) {
        const int right = ring_right(r, n);
        const int sent = rs_send_chunk(r, n, s);
        REQUIRE(rs_recv_chunk(right, n, s) == sent);  // both sides agree
        if (s + 1 < ring_steps(n)) REQUIRE(rs_send_chunk(r, n, s + 1) == rs_recv_chunk(r, n, s));
        CHECK((before[right][sent] & before[r][sent]) == 0);  // nothing counted twice
        have[right][sent] = before[right][sent] | before[r][sent];
      }
    }
    for (int r = 0; r < n; ++r) CHECK(have[r][r] == (1u << n) - 1);
  }
}

TEST_CASE("ring allgather schedule gives every rank every chunk", "[patterns]") {
  for (int n = 1; n <= 9; ++n) {
    std::vector<std::vector<bool>> has(n, std::vector<bool>(n, false));
    for (int r = 0; r < n; ++r) has[r][r] = true;
    for (int s = 0; s < ring_steps(n); ++s) {
      auto before = has;
      for (int r = 0; r < n; ++r) {
        const int right = ring_right(r, n);
        const int sent = ag_send_chunk(r, n, s);
        REQUIRE(before[r][sent]);
        REQUIRE(ag_recv_chunk(right, n, s) == sent);
        CHECK_FALSE(before[right][sent]);
        has[right][sent] = true;
      }
    }
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < n; ++c) CHECK(has[r][c]);
  }
}

TEST_CASE("broadcast chain visits every rank once from the root", "[patterns]") {
  for (int n = 1; n <= 9; ++n) {
    for (int root = 0; root < n; ++root) {
      CHECK(chain_position(root, n, root).parent == -1);
      std::vector<int> seen(n, 0);
      int at = root, hops = 0;
      while (at >= 0 && hops <= n) {
        ++seen[at];
        const int child = chain_position(at, n, root).child;
        if (child >= 0) CHECK(chain_position(child, n, root).parent == at);
        at = child;
        ++hops;
      }
      CHECK(hops == n);
      for (int r = 0; r < n; ++r) CHECK(seen[r] == 1);
    }
  }
}

TEST_CASE("dissemination barrier: every rank hears from every rank", "[patterns]") {
  CHECK(dissemination_rounds(1) == 0);
  CHECK(dissemination_rounds(2) == 1);
  CHECK(dissemination_rounds(5) == 3);
  CHECK(dissemination_rounds(8) == 3);
  CHECK(dissemination_rounds(9) == 4);
  for (int n = 1; n <= 17; ++n) {
    std::vector<uint32_t> know(n);
    for (int r = 0; r < n; ++r) know[r] = 1u << r;
    for (int k = 0; k < dissemination_rounds(n); ++k) {
      auto before = know;
      for (int r = 0; r < n; ++r) {
        const int to = dissemination_send_peer(r, n, k);
        REQUIRE(dissemination_recv_peer(to, n, k) == r);
        know[to] |= before[r];
      }
    }
    for (int r = 0; r < n; ++r) CHECK(know[r] == (1u << n) - 1);
  }
}

TEST_CASE("recursive doubling: every rank ends with every contribution exactly once",
          "[patterns][recursive_doubling]") {
  using namespace chorus::patterns;
  for (int n = 1; n <= 33; ++n) {
    INFO("n = " << n);
    const int p = pow2_floor(n);
    REQUIRE(p <= n);
    REQUIRE(p * 2 > n);
    REQUIRE((1 << rd_rounds(n)) == p);
    // Simulate: each rank holds a multiset of contributions (counts per rank).
    std::vector<std::vector<int>> held(n, std::vector<int>(n, 0));
    for (int r = 0; r < n; ++r) held[r][r] = 1;
    for (int r = p; r < n; ++r) {  // fold
      REQUIRE(rd_is_extra(r, n));
      int partner = rd_extra_partner(r, n);
      REQUIRE(partner == r - p);
      REQUIRE(rd_extra_partner(partner, n) == r);
      for (int i = 0; i < n; ++i) held[partner][i] += held[r][i];
    }
    for (int round = 0; round < rd_rounds(n); ++round) {
      auto before = held;
      for (int r = 0; r < p; ++r) {
        int partner = rd_round_partner(r, round);
        REQUIRE(partner >= 0);
        REQUIRE(partner < p);
        REQUIRE(rd_round_partner(partner, round) == r);
        for (int i = 0; i < n; ++i) held[r][i] = before[r][i] + before[partner][i];
      }
    }
    for (int r = p; r < n; ++r) held[r] = held[r - p];  // unfold
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < n; ++i) REQUIRE(held[r][i] == 1);
    for (int r = 0; r < p; ++r) {
      REQUIRE_FALSE(rd_is_extra(r, n));
      REQUIRE(rd_extra_partner(r, n) == (r + p < n ? r + p : -1));
    }
  }
}

TEST_CASE("binomial tree: every rank reaches the root once, in ceil(log2 n) levels",
          "[patterns][tree]") {
  for (int n = 1; n <= 33; ++n) {
    for (int root = 0; root < n; ++root) {
      INFO("n " << n << " root " << root);
      std::vector<int> parent(static_cast<std::size_t>(n)),
          children_seen(static_cast<std::size_t>(n));
      for (int r = 0; r < n; ++r) {
        auto node = binomial_node(r, n, root);
        parent[static_cast<std::size_t>(r)] = node.parent;
        REQUIRE((r == root) == (node.parent == -1));
        for (int c : node.children) {
          REQUIRE(c >= 0);
          REQUIRE(c < n);
          REQUIRE(binomial_node(c, n, root).parent == r);
          ++children_seen[static_cast<std::size_t>(c)];
        }
      }
      int rounds = 0;
      while ((1 << rounds) < n) ++rounds;
      for (int r = 0; r < n; ++r) {
        CHECK(children_seen[static_cast<std::size_t>(r)] == (r == root ? 0 : 1));
        int depth = 0;
        for (int at = r; at != root; at = parent[static_cast<std::size_t>(at)]) {
          REQUIRE(++depth <= rounds);
        }
      }
    }
  }
}

TEST_CASE("pairwise exchange: every ordered pair meets exactly once", "[patterns][tree]") {
  for (int n = 1; n <= 12; ++n) {
    std::vector<int> meets(static_cast<std::size_t>(n * n));
    for (int r = 0; r < n; ++r)
      for (int s = 1; s < n; ++s) {
        const int to = pairwise_send_peer(r, n, s);
        CHECK(pairwise_recv_peer(to, n, s) == r);  // the receiver expects r at step s
        ++meets[static_cast<std::size_t>(r * n + to)];
      }
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        CHECK(meets[static_cast<std::size_t>(a * n + b)] == (a == b ? 0 : 1));
  }
}

TEST_CASE("ranges of counts are consecutive", "[patterns][tree]") {
  const std::size_t counts[] = {3, 0, 5, 1};
  auto r = ranges_of(counts, 4);
  CHECK(r[0] == Range{0, 3});
  CHECK(r[1] == Range{3, 0});
  CHECK(r[2] == Range{3, 5});
  CHECK(r[3] == Range{8, 1});
}

TEST_CASE("recursive halving then doubling: rank r reduces chunk r, then every rank has all",
          "[patterns][recursive_doubling]") {
  for (int p = 1; p <= 64; p *= 2) {
    const int rounds = rd_rounds(p);
    REQUIRE((1 << rounds) == p);
    for (std::size_t count : {0, 1, 7, 131}) {
      INFO("p " << p << " count " << count);
      const auto chunks = balanced_chunks(count, p);
      // have[r][c]: bit mask of the ranks whose contribution rank r's copy of chunk c holds.
      std::vector<std::vector<uint64_t>> have(p, std::vector<uint64_t>(p));
      for (int r = 0; r < p; ++r)
        for (int c = 0; c < p; ++c) have[r][c] = uint64_t{1} << r;
      for (int k = 0; k < rounds; ++k) {
        const int w = rh_width(p, k);
        auto before = have;
        for (int r = 0; r < p; ++r) {
          const int partner = r ^ w;
          const ChunkWindow keep = window_of(r, w), give = window_of(partner, w);
          // The halves are disjoint, adjacent, and what the partner keeps is what r gives.
          CHECK((keep.first == give.first + w || give.first == keep.first + w));
          CHECK(window_of(partner, w).first == give.first);
          const Range kept = window_range(chunks, keep);
          CHECK(kept.offset == chunks[static_cast<std::size_t>(keep.first)].offset);
          for (int c = keep.first; c < keep.first + w; ++c) {
            CHECK((before[r][c] & before[partner][c]) == 0);  // nothing reduced twice
            have[r][c] = before[r][c] | before[partner][c];
          }
        }
      }
      const uint64_t all = p == 64 ? ~uint64_t{0} : (uint64_t{1} << p) - 1;
      for (int r = 0; r < p; ++r) CHECK(have[r][r] == all);
      // Doubling allgather: what a rank holds complete, as chunk ranges.
      std::vector<std::vector<bool>> full(p, std::vector<bool>(p));
      for (int r = 0; r < p; ++r) full[r][r] = true;
      for (int k = 0; k < rounds; ++k) {
        auto before = full;
        for (int r = 0; r < p; ++r) {
          const int partner = rd_round_partner(r, k);
          const ChunkWindow theirs = window_of(partner, 1 << k);
          for (int c = theirs.first; c < theirs.first + theirs.width; ++c) {
            CHECK(before[partner][c]);  // the partner sends only what it has
            full[r][c] = true;
          }
          const ChunkWindow mine = window_of(r, 1 << k);
          for (int c = mine.first; c < mine.first + mine.width; ++c) CHECK(before[r][c]);
        }
      }
      for (int r = 0; r < p; ++r)
        for (int c = 0; c < p; ++c) CHECK(full[r][c]);
      // A window's elements are its chunks' elements, back to back.
      const Range whole = window_range(chunks, ChunkWindow{0, p});
      CHECK(whole == Range{0, count});
    }
  }
}

TEST_CASE("double binary tree: two spanning binary trees, complementary interiors",
          "[patterns][tree]") {
  for (int n = 1; n <= 64; ++n) {
    int depth_bound = 0;
    while ((1 << depth_bound) < n) ++depth_bound;  // ceil(log2 n)
    std::vector<int> interior_in(static_cast<std::size_t>(n));
    for (int t = 0; t < 2; ++t) {
      INFO("n " << n << " tree " << t);
      const int root = dtree_root(n, t);
      std::vector<int> parent(static_cast<std::size_t>(n)), claimed(static_cast<std::size_t>(n));
      for (int r = 0; r < n; ++r) {
        const TreeNode node = dtree_node(r, n, t);
        if (t == 0) CHECK(node.parent == btree_node(r, n).parent);
        parent[static_cast<std::size_t>(r)] = node.parent;
        REQUIRE((r == root) == (node.parent == -1));
        if (node.parent >= 0) {
          REQUIRE(node.parent < n);
          REQUIRE(node.parent != r);
        }
        REQUIRE(node.children.size() <= 2);
        for (std::size_t i = 0; i < node.children.size(); ++i) {
          const int c = node.children[i];
          REQUIRE(c >= 0);
          REQUIRE(c < n);
          if (i > 0) CHECK(c > node.children[i - 1]);  // ascending, distinct
          CHECK(dtree_node(c, n, t).parent == r);      // parent and children agree
          ++claimed[static_cast<std::size_t>(c)];
        }
        if (!node.children.empty()) ++interior_in[static_cast<std::size_t>(r)];
      }
      // Spanning: every rank but the root is some rank's child exactly once,
      // and climbs to the root within ceil(log2 n) hops (no cycles).
      for (int r = 0; r < n; ++r) {
        CHECK(claimed[static_cast<std::size_t>(r)] == (r == root ? 0 : 1));
        int hops = 0;
        for (int at = r; at != root; at = parent[static_cast<std::size_t>(at)])
          REQUIRE(++hops <= depth_bound);
      }
    }
    // Even n: no rank is interior in both trees. Odd n >= 3: only rank 0.
    for (int r = 0; r < n; ++r) {
      INFO("n " << n << " rank " << r);
      const bool both = interior_in[static_cast<std::size_t>(r)] == 2;
      CHECK(both == (n % 2 == 1 && n >= 3 && r == 0));
    }
  }
}

TEST_CASE("ring allreduce rounds: whole below kRingRoundsFrom rounds, else round_bytes each",
          "[patterns]") {
  CHECK(kRingRoundsFrom == 8);
  // Off: the whole call, whatever its size.
  CHECK(ring_round_elems(std::size_t{1} << 30, 4, 0) == std::size_t{1} << 30);
  // 1 MiB rounds of float32 (262144 elements) from 8 MiB (2097152 elements).
  CHECK(ring_round_elems(2097151, 4, 1 << 20) == 2097151);
  CHECK(ring_round_elems(2097152, 4, 1 << 20) == 262144);
  CHECK(ring_round_elems(std::size_t{16} << 20, 4, 1 << 20) == 262144);
  // Other element sizes: rounds are bytes, not elements.
  CHECK(ring_round_elems(std::size_t{8} << 20, 1, 1 << 20) == std::size_t{1} << 20);
  CHECK(ring_round_elems(std::size_t{1} << 20, 8, 1 << 20) == 131072);
  CHECK(ring_round_elems(1048575, 8, 1 << 20) == 1048575);
  // A round smaller than an element is one element.
  CHECK(ring_round_elems(100, 16, 8) == 1);
  CHECK(ring_round_elems(0, 4, 64) == 0);
}
