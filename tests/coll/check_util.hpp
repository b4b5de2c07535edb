// Helpers shared by the collective checks (check.cpp, check_more.cpp).
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <vector>

#include "collectives/call.hpp"
#include "tests/coll/check.hpp"
#include "tests/coll/guarded.hpp"
#include "tests/coll/harness.hpp"
#include "tests/coll/values.hpp"

namespace chorus::test {

template <typename Tr>
using Buffers = std::vector<Guarded<typename Tr::T>>;

// Compares out[begin + i] with want(i) for i < count; "" or the first difference.
template <typename Tr, typename Buf, typename Want>
std::string compare(const char* what, int rank, const Buf& out, std::size_t begin,
                    std::size_t count, ReduceOp op, Want&& want) {
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (!same<Tr>(out[begin + i], want(i), op)) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad == 0) return "";
  return fmt::format("rank {} {}: {} of {} elements wrong; first at {}: got {} want {}", rank, what,
                     bad, count, first, Tr::to(out[begin + first]), Tr::to(want(first)));
}

// "" when no rank's buffers were written outside their range.
template <typename T>
std::string guard_damage(const std::vector<Guarded<T>>& bufs, const char* what) {
  for (std::size_t r = 0; r < bufs.size(); ++r)
    if (auto d = bufs[r].guard_damage(fmt::format("rank {} {}", r, what)); !d.empty()) return d;
  return "";
}

inline RunOptions options_for(const Case& c) {
  RunOptions o;
  o.segment_bytes = c.segment_bytes;
  o.hosts = std::string(c.hosts);
  o.ring_round_bytes = c.ring_round_bytes;
  // Shared memory: the small segment sizes force 64-byte pieces (many rounds,
  // every slot reused) and a 256-byte latency path; the large ones pieces of
  // 4-64 KiB, as large as leaves an allreduce kMinRounds rounds (unequal
  // pieces, rounds and slot use from call to call, as with ranks > cores).
  if (c.segment_bytes > 64) {
    o.shm_piece_bytes = 64 << 10;
    o.shm_small_bytes = 16 << 10;
    o.shm_base_piece_bytes = 4 << 10;
  }
  return o;
}

// Runs `call` on this rank with the registered algorithm named `algo` ("":
// shm over shared memory, else the ring), as the communicator would: its
// signature (sequence number 1) and context. Throws InvariantError for an
// unknown algorithm or one that refuses the call.
void run_registered(RankEnv& env, const CollectiveCall& call, std::string_view algo);

}  // namespace chorus::test
