// chorus-tune: measures every algorithm on the real job and writes the
// tuning file CHORUS_TUNING_FILE loads (collectives/tuner/tuning_file.hpp),
// so a cluster is tuned once from measurement instead of from the model.
//
//   chorusrun -np 4 chorus-tune -o tune.json --collectives allreduce,broadcast,allgather
//             -b 8 -e 64M -f 4 --budget-ms 200
//
// For each collective, each algorithm that does not refuse the job's world
// team (and, when it spans hosts, the hierarchical algorithm with each
// algorithm of its stage across hosts) and each size: a few warm-up calls,
// then timed calls, each after a barrier, as many as rank 0's estimate fits
// in the per-size budget. A call's time is the slowest rank's (every rank
// reduces the times with MAX, so all agree); an algorithm's time at a size is
// the median over the calls. The winner per size is the fastest; adjacent
// sizes with one winner merge into a range, its bounds at the geometric mean
// of the neighbouring sizes (the first from 0, the last to inf). Rank 0
// writes the file.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "collectives/call.hpp"
#include "collectives/common/subcall.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/tuning_file.hpp"
#include "include/chorus.h"
#include "lib/api/handles.hpp"

namespace {

using namespace chorus;

struct Options {
  std::string out = "chorus-tune.json";
  std::vector<std::string> collectives = {"allreduce", "broadcast", "allgather"};
  std::string min_text = "8", max_text = "64M";
  uint64_t min_bytes = 8, max_bytes = 64ull << 20;
  int factor = 4;
  int warmup = 2;
  double budget_ms = 100;
  int max_iters = 200;
};

struct Job {
  chorus_comm_t comm = nullptr;
  int rank = 0, size = 1;
  std::vector<float> send, recv;
};

void check(Job& job, chorus_result_t rc, const char* what) {
  if (rc == CHORUS_SUCCESS) return;
  std::fprintf(stderr, "chorus-tune: rank %d: %s: %s: %s\n", job.rank, what,
               chorus_result_string(rc), chorus_comm_last_error(job.comm));
  std::fflush(stderr);
  chorus_comm_abort(job.comm, what);
  std::exit(2);
}

// Elements per rank of a call of about `bytes` (CallShape::bytes: an
// allgather's is the gathered buffer, as chorus-bench's size column).
std::size_t count_for(CollectiveKind kind, uint64_t bytes, int n) {
  const uint64_t per = kind == CollectiveKind::allgather ? sizeof(float) * n : sizeof(float);
  return std::max<std::size_t>(1, bytes / per);
}

std::size_t bytes_of(CollectiveKind kind, std::size_t count, int n) {
  return count * sizeof(float) * (kind == CollectiveKind::allgather ? n : 1);
}

void call_once(Job& job, CollectiveKind kind, std::size_t count) {
  chorus_result_t rc = CHORUS_SUCCESS;
  switch (kind) {
    case CollectiveKind::allreduce:
      rc = chorus_allreduce(job.comm, job.send.data(), job.recv.data(), count, CHORUS_FLOAT32,
                            CHORUS_SUM, 0);
      break;
    case CollectiveKind::broadcast:
      rc = chorus_broadcast(job.comm, job.recv.data(), count, CHORUS_FLOAT32, 0, 0);
      break;
    case CollectiveKind::allgather:
      rc = chorus_allgather(job.comm, job.send.data(), job.recv.data(), count, CHORUS_FLOAT32, 0);
      break;
    default:
      throw UsageError(fmt::format("chorus-tune cannot time {}", collective_name(kind)));
  }
  check(job, rc, "a timed call");
}

// The elementwise MAX over ranks of `v`, on every rank.
void max_over_ranks(Job& job, std::vector<double>& v) {
  check(job,
        chorus_allreduce(job.comm, v.data(), v.data(), v.size(), CHORUS_FLOAT64, CHORUS_MAX, 0),
        "the MAX of the times");
}

// Microseconds of one call, each after a barrier, as the slowest rank saw it.
std::vector<double> time_calls(Job& job, CollectiveKind kind, std::size_t count, int calls) {
  std::vector<double> us(static_cast<std::size_t>(calls));
  for (auto& t : us) {
    check(job, chorus_barrier(job.comm, 0), "barrier");
    const auto t0 = std::chrono::steady_clock::now();
    call_once(job, kind, count);
    t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  max_over_ranks(job, us);
  return us;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double measure(Job& job, const Options& o, CollectiveKind kind, std::size_t count) {
  for (int i = 0; i < o.warmup; ++i) call_once(job, kind, count);
  // Rank 0's reading of one call sets how many fit the budget; it is
  // broadcast, so every rank makes as many calls.
  const double one_us = time_calls(job, kind, count, 1)[0];
  int64_t calls =
      std::clamp<int64_t>(static_cast<int64_t>(o.budget_ms * 1000 / one_us), 3, o.max_iters);
  check(job, chorus_broadcast(job.comm, &calls, 1, CHORUS_INT64, 0, 0), "the call count");
  return median(time_calls(job, kind, count, static_cast<int>(calls)));
}

// What to time for `kind` on this job: every algorithm that does not refuse
// the world team, and across hosts the hierarchical one with each algorithm
// of its stage between hosts.
std::vector<std::string> choices_for(CollectiveKind kind, const Team& world) {
  CollectiveCall call;
  call.kind = kind;
  call.dtype = DataType::f32;
  call.op = ReduceOp::sum;
  std::vector<std::string> out;
  for (const AlgorithmSpec* a : algorithms_for(kind)) {
    if (a->refusal(world, call)) continue;
    out.emplace_back(a->name);
    if (a->name != "hierarchical") continue;
    // A team of one rank per host stands for the stage's teams across
    // hosts (lanes, leaders): what refuses it (shared memory, another
    // hierarchy) would only fall back to selection there.
    const Team& across = *world.hierarchy->across_shape;
    for (CollectiveKind stage : stage_kinds(kind, StageRole::across)) {
      CollectiveCall stage_call = call;
      stage_call.kind = stage;
      for (const AlgorithmSpec* inner : algorithms_for(stage))
        if (!inner->refusal(across, stage_call))
          out.push_back(fmt::format("hierarchical(across={})", inner->name));
    }
  }
  return out;
}

CollectiveKind kind_named(const std::string& name) {
  const CollectiveKind k = parse_collective(name, "--collectives");
  if (k != CollectiveKind::allreduce && k != CollectiveKind::broadcast &&
      k != CollectiveKind::allgather)  // what call_once can time
    throw UsageError(
        fmt::format("--collectives: '{}' is not allreduce, broadcast or allgather", name));
  return k;
}

// The entries of one collective from its sizes' measurements: runs of sizes
// with one winner, bounded at the geometric mean of neighbouring sizes.
void add_entries(TuningTable& table, CollectiveKind kind, const Team& world,
                 const std::vector<std::size_t>& sizes, const std::vector<std::string>& choices,
                 const std::vector<std::vector<double>>& us) {  // us[size][choice]
  auto winner = [&](std::size_t s) {
    return static_cast<std::size_t>(std::min_element(us[s].begin(), us[s].end()) - us[s].begin());
  };
  for (std::size_t first = 0; first < sizes.size();) {
    std::size_t last = first;
    while (last + 1 < sizes.size() && winner(last + 1) == winner(first)) ++last;
    TuningEntry e;
    e.kind = kind;
    e.ranks = world.size();
    e.hosts = hosts_of(world);
    auto bound = [&](std::size_t i) {  // between sizes i - 1 and i
      return static_cast<std::size_t>(
          std::llround(std::sqrt(static_cast<double>(sizes[i - 1]) * sizes[i])));
    };
    e.lo = first == 0 ? 0 : bound(first);
    e.hi = last + 1 == sizes.size() ? SIZE_MAX : bound(last + 1);
    e.choice = AlgoChoice::parse(kind, choices[winner(first)], "chorus-tune");
    const std::size_t mid = (first + last) / 2;  // the times quoted: the middle size's
    for (std::size_t c = 0; c < choices.size(); ++c) e.times_us[choices[c]] = us[mid][c];
    table.entries.push_back(std::move(e));
    first = last + 1;
  }
}

int tune(const Options& o) {
  Job job;
  if (chorus_result_t rc = chorus_init_from_env(&job.comm); rc != CHORUS_SUCCESS) {
    std::fprintf(stderr, "chorus-tune: chorus_init_from_env: %s: %s\n", chorus_result_string(rc),
                 chorus_comm_last_error(nullptr));
    return 2;
  }
  chorus_comm_rank(job.comm, &job.rank);
  chorus_comm_size(job.comm, &job.size);
  Communicator& comm = api::lookup(job.comm);
  const Team& world = comm.world();
  TuningTable table;
  for (const std::string& name : o.collectives) {
    const CollectiveKind kind = kind_named(name);
    std::vector<std::size_t> counts, sizes;
    for (uint64_t b = o.min_bytes; b <= o.max_bytes; b *= static_cast<uint64_t>(o.factor)) {
      const std::size_t count = count_for(kind, b, job.size);
      if (sizes.empty() || bytes_of(kind, count, job.size) != sizes.back()) {
        counts.push_back(count);
        sizes.push_back(bytes_of(kind, count, job.size));
      }
      if (b > o.max_bytes / static_cast<uint64_t>(o.factor)) break;
    }
    const std::size_t most = counts.back() * (kind == CollectiveKind::allgather ? job.size : 1);
    job.send.assign(most, 1.0f);
    job.recv.assign(most, 0.0f);
    const std::vector<std::string> choices = choices_for(kind, world);
    std::vector<std::vector<double>> us(sizes.size(), std::vector<double>(choices.size()));
    for (std::size_t c = 0; c < choices.size(); ++c) {
      // Forced for every size; each rank parses the same text.
      comm.set_algo_override(AlgoOverride::parse(fmt::format("{}:0-inf:{}", name, choices[c])));
      for (std::size_t s = 0; s < sizes.size(); ++s) us[s][c] = measure(job, o, kind, counts[s]);
    }
    if (job.rank == 0) {
      fmt::print("# {} on {} ranks, hosts {}: median of the slowest rank's time, us\n", name,
                 job.size, hosts_of(world));
      fmt::print("{:>10}", "bytes");
      for (const auto& c : choices) fmt::print("  {:>{}}", c, std::max<std::size_t>(c.size(), 9));
      fmt::print("  winner\n");
      for (std::size_t s = 0; s < sizes.size(); ++s) {
        fmt::print("{:>10}", sizes[s]);
        for (std::size_t c = 0; c < choices.size(); ++c)
          fmt::print("  {:>{}.1f}", us[s][c], std::max<std::size_t>(choices[c].size(), 9));
        const auto w = std::min_element(us[s].begin(), us[s].end()) - us[s].begin();
        fmt::print("  {}\n", choices[static_cast<std::size_t>(w)]);
      }
    }
    add_entries(table, kind, world, sizes, choices, us);
  }
  comm.set_algo_override(AlgoOverride{});
  // The link between hosts as this job saw it (probed at init), so that jobs
  // choosing from this file skip the probe and model the same link.
  if (hosts_of(world) > 1)
    table.links["other_host"] = TunedLink{comm.network().alpha_us, comm.network().gbps};
  int rc = 0;
  if (job.rank == 0) {
    std::ofstream out(o.out);
    out << table.to_json();
    if (!out) {
      std::fprintf(stderr, "chorus-tune: cannot write %s\n", o.out.c_str());
      rc = 1;
    } else {
      fmt::print("# wrote {} ({} entries)\n", o.out, table.entries.size());
    }
  }
  chorus_comm_destroy(job.comm);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"chorus-tune: time every algorithm on this job and write a tuning file"};
  app.add_option("-o,--output", o.out, "Tuning file to write (rank 0)");
  app.add_option("--collectives", o.collectives, "allreduce, broadcast, allgather")->delimiter(',');
  app.add_option("-b,--minbytes", o.min_text, "Smallest size (K/M/G suffixes)");
  app.add_option("-e,--maxbytes", o.max_text, "Largest size");
  app.add_option("-f,--stepfactor", o.factor, "Size multiplier")->check(CLI::Range(2, 1024));
  app.add_option("-w,--warmup", o.warmup, "Warm-up calls per size and algorithm");
  app.add_option("--budget-ms", o.budget_ms,
                 "Time budget of the timed calls per size and algorithm")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-iters", o.max_iters, "Most timed calls per size and algorithm")
      ->check(CLI::Range(3, 1000000));
  CLI11_PARSE(app, argc, argv);
  if (!bench_parse_bytes(o.min_text.c_str(), &o.min_bytes) ||
      !bench_parse_bytes(o.max_text.c_str(), &o.max_bytes) || o.min_bytes > o.max_bytes) {
    std::fprintf(stderr, "chorus-tune: bad size range %s..%s\n", o.min_text.c_str(),
                 o.max_text.c_str());
    return 2;
  }
  try {
    return tune(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-tune: %s\n", e.what());
    return 2;
  }
}
