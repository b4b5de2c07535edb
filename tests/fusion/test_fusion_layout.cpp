// Where a fused bucket's tensors lie, through the C API on thread ranks
// (tests/api/api_harness.hpp): tensors back to back in one buffer reduced
// where they lie; large tensors in runs; the default alone rule
// (CHORUS_FUSION_ALONE=auto), under which tensors apart fuse at any size
// where the allreduce reads them in parts (shared memory, the ring over TCP)
// and go alone from 64 KiB where they are packed (compressed on the wire).
//
// The meson test sets CHORUS_TIMEOUT=6 and CHORUS_FUSION_STALL_S=1 (the
// configuration is the process's).
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "include/chorus.h"
#include "tests/api/api_harness.hpp"
#include "tests/fusion/fusion_plan.hpp"

using chorus::test::all_zero;
using chorus::test::run;
using namespace chorus::test::fusion;

TEST_CASE("fused allreduce: tensors back to back in one buffer are reduced where they lie",
          "[fusion]") {
  // Rank 0 submits in memory order, rank 1 in reverse: a bucket's tensors
  // are adjacent in memory on one rank and not on the other, which copies;
  // the collective is the same. In place and out of place.
  const int n = 2, tensors = 64, steps = 5;
  std::vector<std::size_t> count(tensors), offset(tensors);
  std::size_t total = 0;
  for (int t = 0; t < tensors; ++t) {
    count[t] = 1 + std::size_t(t) * 37 % 500;
    offset[t] = total;
    total += count[t];
  }
  for (bool in_place : {true, false}) {
    std::vector<std::string> notes(n);
    std::vector<chorus_fusion_stats_t> stats(n);
    auto results = run(n, [&](int rank, chorus_comm_t comm) -> int {
      std::vector<float> in(total), out(total, -1.0f);
      float* result = in_place ? in.data() : out.data();
      for (int step = 0; step < steps; ++step) {
        for (std::size_t i = 0; i < total; ++i) in[i] = float((i + std::size_t(step)) % 97 + rank);
        std::vector<chorus_request_t> requests(tensors, nullptr);
        for (int k = 0; k < tensors; ++k) {
          const int t = rank == 0 ? k : tensors - 1 - k;
          const std::string name = "p" + std::to_string(t);
          if (chorus_fused_allreduce(comm, name.c_str(), in.data() + offset[t], result + offset[t],
                                     count[t], CHORUS_FLOAT32, CHORUS_SUM, &requests[t]))
            return 1;
        }
        for (auto& r : requests)
          if (chorus_wait(&r, 0)) return 2;
        for (std::size_t i = 0; i < total; ++i)
          if (result[i] != float(2 * ((i + std::size_t(step)) % 97) + 1)) {
            notes[rank] = "step " + std::to_string(step) + " element " + std::to_string(i) + " = " +
                          std::to_string(result[i]);
            return 3;
          }
      }
      stats[rank] = stats_of(comm);
      return chorus_barrier(comm, 0) == CHORUS_SUCCESS ? 0 : 4;
    });
    INFO("in place " << in_place << ": " << notes[0] << " / " << notes[1]);
    CHECK(all_zero(results));
    CHECK(stats[0].tensors == std::uint64_t(tensors * steps));
  }
}

namespace {

// Per rank and step after the first: rounds on the fast path, rounds on the
// full one, and allreduces. Only a step reduced in one round says how many
// buckets a step makes: an idle round of the engine (10 ms between steps, as
// on a slow or sanitised build) may take a step in two.
struct StepCount {
  uint64_t fast = 0, slow = 0, allreduces = 0;
};

// 2 ranks reduce `count`'s float32 tensors in place, in one arena per rank,
// for `steps` steps, with `wire` on the wire (the values are integers below
// 256: exact in bfloat16); tensor t lies gap(rank, t) floats after the one
// before.
// Checks every element; returns each rank's StepCounts ("" notes: no error).
std::vector<std::vector<StepCount>> large_tensor_steps(
    const std::vector<std::size_t>& count, const std::function<std::size_t(int, std::size_t)>& gap,
    uint64_t alone_bytes, const char* transport, std::vector<std::string>& notes,
    chorus_dtype_t wire = CHORUS_WIRE_DTYPE_DEFAULT) {
  const int n = 2, steps = 10;
  notes.assign(n, "");
  std::vector<std::vector<StepCount>> counts(n);
  auto results = run(
      n,
      [&](int rank, chorus_comm_t comm) -> int {
        chorus_fusion_options_t options = CHORUS_FUSION_OPTIONS_INITIALIZER;
        options.alone_bytes = alone_bytes;
        options.wire_dtype = wire;
        // Step 0 (no names known yet) waits for the cycle; later steps are
        // due at once when complete, so no timed cycle splits one.
        options.cycle_ms = 200;
        if (chorus_fusion_configure(comm, &options)) return 1;
        // Where element i of tensor t lies on each rank.
        auto offsets = [&](int r) {
          std::vector<std::size_t> at;
          std::size_t total = 0;
          for (std::size_t t = 0; t < count.size(); ++t) {
            total += gap(r, t);
            at.push_back(total);
            total += count[t];
          }
          at.push_back(total);
          return at;
        };
        const std::vector<std::size_t> mine = offsets(rank), at0 = offsets(0), at1 = offsets(1);
        std::vector<float> data(mine.back());
        chorus_fusion_stats_t before = stats_of(comm);
        for (int step = 0; step < steps; ++step) {
          for (std::size_t t = 0; t < count.size(); ++t)
            for (std::size_t i = 0; i < count[t]; ++i)
              data[mine[t] + i] = float((mine[t] + i + step) % 89 + rank);
          // Every rank submits a step at once: a rank still filling its
          // data when the engine's idle round (every 10 ms) comes would
          // take the step in two rounds (so would a slow, sanitised build).
          if (chorus_barrier(comm, 0)) return 6;
          std::vector<chorus_request_t> requests(count.size(), nullptr);
          for (std::size_t t = 0; t < count.size(); ++t) {
            const std::string name = "c" + std::to_string(t);
            float* p = data.data() + mine[t];
            if (chorus_fused_allreduce(comm, name.c_str(), p, p, count[t], CHORUS_FLOAT32,
                                       CHORUS_SUM, &requests[t]))
              return 2;
          }
          for (auto& r : requests)
            if (chorus_wait(&r, 0)) return 3;
          const chorus_fusion_stats_t after = stats_of(comm);
          if (step > 0)
            counts[rank].push_back({after.fast_cycles - before.fast_cycles,
                                    after.slow_cycles - before.slow_cycles,
                                    after.allreduces - before.allreduces});
          before = after;
          for (std::size_t t = 0; t < count.size(); ++t)
            for (std::size_t i = 0; i < count[t]; ++i) {
              const float want =
                  float((at0[t] + i + step) % 89) + float((at1[t] + i + step) % 89 + 1);
              if (data[mine[t] + i] != want) {
                notes[rank] = "step " + std::to_string(step) + " tensor c" + std::to_string(t) +
                              "[" + std::to_string(i) + "] = " + std::to_string(data[mine[t] + i]) +
                              ", want " + std::to_string(want);
                return 4;
              }
            }
        }
        return chorus_barrier(comm, 0) == CHORUS_SUCCESS ? 0 : 5;
      },
      transport);
  if (!all_zero(results)) notes[0] += " (a rank failed)";
  return counts;
}

// Every step reduced in one round took `allreduces`, and some step was.
void check_allreduces_per_step(const std::vector<std::vector<StepCount>>& counts,
                               uint64_t allreduces) {
  for (std::size_t r = 0; r < counts.size(); ++r) {
    int one_round = 0;
    for (std::size_t s = 0; s < counts[r].size(); ++s) {
      const StepCount& c = counts[r][s];
      INFO("rank " << r << " step " << s + 1 << ": " << c.fast << " fast and " << c.slow
                   << " full rounds, " << c.allreduces << " allreduces");
      CHECK(c.slow == 0);  // every name is known after the first step
      if (c.fast != 1) continue;
      ++one_round;
      CHECK(c.allreduces == allreduces);
    }
    INFO("rank " << r);
    CHECK(one_round > 0);
  }
}

// Tensors of 64 KiB and more among small ones.
const std::vector<std::size_t> kLargeAndSmall = {100, 20000, 50, 30000, 16384, 7, 40000};

}  // namespace

TEST_CASE("fused allreduce: large tensors back to back on every rank share one allreduce",
          "[fusion]") {
  // Tensors of the alone size (64 KiB here) or more go alone, unless every
  // rank has them right after the tensor before (known order): then a
  // bucket runs over them where they lie. With a gap before c3 on one rank
  // only, the run breaks there on every rank: two allreduces a step, not
  // the seven of one per large tensor and one per small run.
  for (bool gap : {false, true}) {
    std::vector<std::string> notes;
    const auto counts = large_tensor_steps(
        kLargeAndSmall,
        [&](int rank, std::size_t t) -> std::size_t { return gap && rank == 1 && t == 3 ? 16 : 0; },
        64 << 10, nullptr, notes);
    INFO("gap " << gap << ": " << notes[0] << " / " << notes[1]);
    REQUIRE(notes[0] + notes[1] == "");
    check_allreduces_per_step(counts, gap ? 2 : 1);
  }
}

TEST_CASE("fused allreduce: by default tensors of any size fuse where the allreduce reads parts",
          "[fusion]") {
  // The same tensors, 16 floats apart on every rank (no runs), with
  // CHORUS_FUSION_ALONE unset (auto). Over shared memory and over TCP a
  // bucket's allreduce (shm, ring) reads and writes them where they lie, so
  // all seven make one bucket. Compressed on the wire they are packed, and
  // each of 64 KiB or more (four) goes alone, between the three small ones:
  // seven allreduces.
  struct Case {
    const char* transport;
    chorus_dtype_t wire;
    uint64_t allreduces;
  };
  for (const Case& c :
       {Case{nullptr, CHORUS_WIRE_DTYPE_DEFAULT, 1}, Case{"tcp", CHORUS_WIRE_DTYPE_DEFAULT, 1},
        Case{"tcp", CHORUS_BFLOAT16, 7}}) {
    std::vector<std::string> notes;
    const auto counts = large_tensor_steps(
        kLargeAndSmall, [](int, std::size_t t) -> std::size_t { return t ? 16 : 0; }, 0,
        c.transport, notes, c.wire);
    INFO((c.transport ? c.transport : "default")
         << (c.wire == CHORUS_BFLOAT16 ? ", bf16" : "") << ": " << notes[0] << " / " << notes[1]);
    REQUIRE(notes[0] + notes[1] == "");
    check_allreduces_per_step(counts, c.allreduces);
  }
}
