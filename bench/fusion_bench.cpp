// chorus-bench fusion: one training step's gradient reduction three ways, as
// docs/benchmarks.md ("Tensor fusion") defines it and bench/compare.py
// --fusion reads it (the Open MPI side: mpi_allreduce_bench fusion):
//   fused          every tensor handed to the fusion engine
//                  (chorus_fused_allreduce), then every request waited on
//   per_tensor     one blocking chorus_allreduce per tensor, in order
//   single_buffer  one chorus_allreduce of one buffer of the same total size
// float32 sum, in place. Per mode: barrier, warm-up steps, barrier, then
// timed steps, each timed on its own; a rank's figure is the median of its
// step times, step_us the maximum over ranks (mean_us and min_us: each
// rank's mean and fastest step, the maximum over ranks). With -c 1 one more step per
// mode runs on fresh data x(r, g) = (g mod M) + 2r (g: the element's index
// in the step) and every element is compared with N (g mod M) + N (N-1).
#include <chorus.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_common.h"
#include "bench_stats.hpp"
#include "fusion_mixes.h"

namespace {

enum Mode { kFused, kPerTensor, kSingleBuffer };
const char* const kModeNames[] = {"fused", "per_tensor", "single_buffer"};

struct Step {
  chorus_comm_t comm = nullptr;
  int rank = 0, nranks = 1;
  std::vector<std::size_t> elems;   // per tensor
  std::vector<std::size_t> offset;  // element offset of each tensor in the arena (64 B aligned)
  std::vector<std::string> names;
  std::vector<float> arena;   // the tensors
  std::vector<float> single;  // single_buffer's buffer
  std::size_t total = 0;      // elements per step
  uint64_t period = 1;
  std::vector<chorus_request_t> requests;
};

int run_step(Step& s, Mode mode) {
  if (mode == kSingleBuffer)
    return chorus_allreduce(s.comm, s.single.data(), s.single.data(), s.total, CHORUS_FLOAT32,
                            CHORUS_SUM, 0);
  if (mode == kPerTensor) {
    for (std::size_t t = 0; t < s.elems.size(); ++t) {
      float* p = s.arena.data() + s.offset[t];
      if (int rc = chorus_allreduce(s.comm, p, p, s.elems[t], CHORUS_FLOAT32, CHORUS_SUM, 0))
        return rc;
    }
    return 0;
  }
  for (std::size_t t = 0; t < s.elems.size(); ++t) {
    float* p = s.arena.data() + s.offset[t];
    if (int rc = chorus_fused_allreduce(s.comm, s.names[t].c_str(), p, p, s.elems[t],
                                        CHORUS_FLOAT32, CHORUS_SUM, &s.requests[t]))
      return rc;
  }
  int first = 0;
  for (auto& r : s.requests)
    if (int rc = chorus_wait(&r, 0); rc && !first) first = rc;
  return first;
}

// Fills the mode's buffers with x(rank, g), or zeros.
void fill(Step& s, Mode mode, bool zeros) {
  std::size_t g = 0;
  for (std::size_t t = 0; t < s.elems.size(); ++t)
    for (std::size_t i = 0; i < s.elems[t]; ++i, ++g) {
      const float v = zeros ? 0.0f : float(g % s.period) + 2.0f * float(s.rank);
      (mode == kSingleBuffer ? s.single[g] : s.arena[s.offset[t] + i]) = v;
    }
}

uint64_t count_wrong(const Step& s, Mode mode) {
  uint64_t wrong = 0;
  const double n = s.nranks;
  std::size_t g = 0;
  for (std::size_t t = 0; t < s.elems.size(); ++t)
    for (std::size_t i = 0; i < s.elems[t]; ++i, ++g) {
      const double want = n * double(g % s.period) + n * (n - 1);
      const double got = mode == kSingleBuffer ? s.single[g] : s.arena[s.offset[t] + i];
      wrong += got != want;
    }
  return wrong;
}

}  // namespace

int fusion_main(int argc, char** argv) {
  int tensors = 1000, warmup = 5, iters = 20, check = 1;
  std::string each_text = "4096", mix_name, transport,
              modes_text = "fused,per_tensor,single_buffer";
  std::string iter_bytes_text = "1G";
  bool json = false, apart = false, interleave = false;
  CLI::App app{
      "chorus-bench fusion: a step of many tensors reduced fused, one by one, and as "
      "one buffer (run under chorusrun)"};
  app.option_defaults()->always_capture_default();
  app.add_option("-N,--tensors", tensors, "Tensors per step")->check(CLI::Range(1, 1 << 20));
  app.add_option("-b,--bytes", each_text, "Bytes of each tensor (K/M suffixes; whole float32s)");
  app.add_option("--mix", mix_name, "A tensor mix of bench/fusion_mixes.h (resnet50, bert-base)");
  app.add_option("-m,--modes", modes_text, "Comma-separated: fused,per_tensor,single_buffer");
  app.add_option("-w,--warmup_iters", warmup, "Warm-up steps (capped by --iter-bytes)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("-n,--iters", iters, "Timed steps (capped by --iter-bytes)")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--iter-bytes", iter_bytes_text, "iters = clamp(ceil(B / step bytes), 1, -n)");
  app.add_option("-c,--check", check, "Check one more step per mode on fresh data (0|1)")
      ->check(CLI::Range(0, 1));
  app.add_option("-t,--transport", transport, "Transport (sets CHORUS_TRANSPORT)");
  app.add_flag("-J,--json", json, "One JSON object per mode");
  app.add_flag("--apart", apart,
               "Leave 64 bytes between tensors, as separately allocated gradients are (the "
               "engine then copies them into its buffer; by default they lie back to back where "
               "their sizes allow, and a bucket of them is reduced where it lies)");
  app.add_flag("--interleave", interleave,
               "Time the modes step by step in turn (fused, single_buffer, fused, ...) instead "
               "of one after the other, so that a machine whose speed drifts from second to "
               "second slows every mode alike (warm-up and checks stay per mode)");
  CLI11_PARSE(app, argc, argv);

  Step s;
  uint64_t each = 0, iter_bytes = 0;
  if (!bench_parse_bytes(each_text.c_str(), &each) ||
      !bench_parse_bytes(iter_bytes_text.c_str(), &iter_bytes) || each < 4) {
    std::fprintf(stderr, "chorus-bench fusion: bad sizes -b %s --iter-bytes %s\n",
                 each_text.c_str(), iter_bytes_text.c_str());
    return 2;
  }
  if (!mix_name.empty()) {
    const chorus_bench_mix* mix = chorus_bench_find_mix(mix_name.c_str());
    if (!mix) {
      std::fprintf(stderr, "chorus-bench fusion: unknown mix '%s'; mixes:", mix_name.c_str());
      chorus_bench_print_mixes(stderr);
      std::fputc('\n', stderr);
      return 2;
    }
    s.elems.assign(mix->elems, mix->elems + mix->count);
  } else {
    s.elems.assign(static_cast<std::size_t>(tensors), each / 4);
  }
  std::vector<Mode> modes;
  for (std::size_t at = 0; at <= modes_text.size();) {
    std::size_t comma = modes_text.find(',', at);
    if (comma == std::string::npos) comma = modes_text.size();
    const std::string name = modes_text.substr(at, comma - at);
    bool known = false;
    for (int m = 0; m < 3; ++m)
      if (name == kModeNames[m]) modes.push_back(Mode(m)), known = true;
    if (!known) {
      std::fprintf(stderr, "chorus-bench fusion: unknown mode '%s'\n", name.c_str());
      return 2;
    }
    at = comma + 1;
  }
  if (!transport.empty()) setenv("CHORUS_TRANSPORT", transport.c_str(), 1);
  if (int rc = chorus_init_from_env(&s.comm)) {
    std::fprintf(stderr, "chorus-bench fusion: init: %s: %s\n",
                 chorus_result_string(chorus_result_t(rc)), chorus_comm_last_error(nullptr));
    return 2;
  }
  chorus_comm_rank(s.comm, &s.rank);
  chorus_comm_size(s.comm, &s.nranks);
  s.period = std::min<uint64_t>(1u << 20, uint64_t(16777216.0 / s.nranks) - s.nranks + 2);
  std::size_t at = 0;
  for (std::size_t t = 0; t < s.elems.size(); ++t) {
    s.offset.push_back(at);
    at += (s.elems[t] + 15) / 16 * 16 + (apart ? 16 : 0);  // 64-byte aligned, as the Open MPI side
    s.total += s.elems[t];
    s.names.push_back("t" + std::to_string(t));
  }
  s.arena.assign(at, 0.0f);
  s.single.assign(s.total, 0.0f);
  s.requests.assign(s.elems.size(), nullptr);
  const uint64_t step_bytes = s.total * 4;
  const int n_iters = bench_iters_for(step_bytes, iter_bytes, iters);
  const int n_warmup = bench_warmup_for(step_bytes, iter_bytes, warmup);

  uint64_t total_wrong = 0;
  int failed = 0;
  const auto warm_up = [&](Mode mode) {
    fill(s, mode, true);
    int rc = chorus_barrier(s.comm, 0);
    for (int i = 0; i < n_warmup && !rc; ++i) rc = run_step(s, mode);
    return rc ? rc : chorus_barrier(s.comm, 0);
  };
  std::vector<std::vector<double>> times(modes.size());
  const auto timed_step = [&](std::size_t m) {
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = run_step(s, modes[m]);
    times[m].push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    return rc;
  };
  int interleaved_rc = 0;
  std::size_t interleaved_failure = 0;  // the mode whose step failed
  if (interleave) {
    for (std::size_t m = 0; m < modes.size() && !interleaved_rc; ++m)
      if ((interleaved_rc = warm_up(modes[m]))) interleaved_failure = m;
    // A barrier before each step: a step that ends with the ranks apart
    // (a ring's last rounds, the wake-ups of waiting threads) would hand its
    // skew to the other mode's next step, which times the ranks' catching
    // up. Back to back, each mode's steps absorb their own.
    for (int i = 0; i < n_iters && !interleaved_rc; ++i)
      for (std::size_t m = 0; m < modes.size() && !interleaved_rc; ++m)
        if ((interleaved_rc = chorus_barrier(s.comm, 0)) || (interleaved_rc = timed_step(m)))
          interleaved_failure = m;
  }
  for (std::size_t m = interleaved_failure; m < modes.size(); ++m) {
    const Mode mode = modes[m];
    int rc = interleaved_rc;
    if (!interleave) {
      rc = warm_up(mode);
      for (int i = 0; i < n_iters && !rc; ++i) rc = timed_step(m);
    }
    uint64_t wrong = 0;
    if (!rc && check) {
      fill(s, mode, false);
      rc = run_step(s, mode);
      if (!rc) wrong = count_wrong(s, mode);
      uint64_t all = wrong;
      if (!rc) rc = chorus_allreduce(s.comm, &wrong, &all, 1, CHORUS_UINT64, CHORUS_SUM, 0);
      wrong = all;
    }
    if (rc) {
      std::fprintf(stderr, "chorus-bench fusion: rank %d, %s: %s: %s\n", s.rank, kModeNames[mode],
                   chorus_result_string(chorus_result_t(rc)), chorus_comm_last_error(s.comm));
      failed = 1;
      break;
    }
    total_wrong += wrong;
    const BenchTimes step = bench_times_over_ranks(s.comm, times[m]);
    const double step_us = step.median;
    const double n = s.nranks;
    const double busbw = step_bytes / step_us / 1e3 * 2 * (n - 1) / n;
    if (s.rank != 0) continue;
    const std::string mix_json = mix_name.empty() ? "null" : "\"" + mix_name + "\"";
    const std::string each_json = mix_name.empty() ? std::to_string(each / 4 * 4) : "null";
    if (json)
      std::printf(
          "{\"impl\": \"chorus\", \"benchmark\": \"fusion\", \"mode\": \"%s\", \"tensors\": %zu, "
          "\"bytes\": %llu, \"bytes_each\": %s, \"mix\": %s, \"np\": %d, \"type\": \"float32\", "
          "\"redop\": \"sum\", \"inplace\": 1, \"warmup\": %d, \"iters\": %d, \"step_us\": %.3f, "
          "\"mean_us\": %.3f, \"min_us\": %.3f, \"busbw_gbps\": %.6f, \"wrong\": %s}\n",
          kModeNames[mode], s.elems.size(), (unsigned long long)step_bytes, each_json.c_str(),
          mix_json.c_str(), s.nranks, n_warmup, n_iters, step_us, step.mean, step.min, busbw,
          check ? std::to_string(wrong).c_str() : "null");
    else
      std::printf(
          "%-14s %8zu tensors %12llu B  step %12.1f us  mean %12.1f us  min %12.1f us  busbw "
          "%8.3f GB/s  wrong %llu\n",
          kModeNames[mode], s.elems.size(), (unsigned long long)step_bytes, step_us, step.mean,
          step.min, busbw, (unsigned long long)wrong);
    std::fflush(stdout);
  }
  if (s.rank == 0 && json && !failed)
    std::printf(
        "{\"summary\": true, \"impl\": \"chorus\", \"benchmark\": \"fusion\", \"np\": %d, "
        "\"wrong\": %s}\n",
        s.nranks, check ? std::to_string(total_wrong).c_str() : "null");
  chorus_comm_destroy(s.comm);
  return failed ? 2 : total_wrong ? 1 : 0;
}
