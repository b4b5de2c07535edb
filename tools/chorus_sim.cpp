// chorus-sim: a scale model. Runs the registry's real allreduce algorithms
// on a simulated world of many hosts (one thread per rank, a virtual clock
// per rank: tools/sim/) and prints each algorithm's predicted time per size,
// the best, and what the tuner would choose.
//   chorus-sim --ranks 256 --hosts 32 --sizes 8:256M
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "base/core/config.hpp"
#include "base/core/error.hpp"
#include "collectives/registry.hpp"
#include "tools/sim/sim_run.hpp"

namespace {

using chorus::sim::AlgoTime;
using chorus::sim::SizeResult;

std::vector<std::size_t> size_sweep(const std::string& text) {
  const auto colon = text.find(':');
  const std::size_t lo = chorus::parse_bytes(text.substr(0, colon));
  const std::size_t hi =
      colon == std::string::npos ? lo : chorus::parse_bytes(text.substr(colon + 1));
  if (lo == 0 || hi < lo) throw chorus::UsageError(CHORUS_ERR_INVALID_ARGUMENT, "--sizes " + text);
  std::vector<std::size_t> sizes;
  for (std::size_t s = lo; s <= hi; s *= 2) sizes.push_back(s);
  return sizes;
}

std::string show_size(std::size_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return fmt::format("{}M", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{}K", b >> 10);
  return std::to_string(b);
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void print_text(const std::vector<SizeResult>& results,
                const std::vector<const chorus::AlgorithmSpec*>& algos) {
  fmt::print("{:>6} {:>6}", "size", "scale");
  for (const auto* a : algos) fmt::print(" {:>14}", a->name);
  fmt::print("  {:<14} {:<14} {:>10}\n", "best", "tuner", "tuner/best");
  for (const auto& r : results) {
    fmt::print("{:>6} {:>6}", show_size(r.bytes), r.scale);
    for (const auto& a : r.algos) {
      if (!a.refusal.empty())
        fmt::print(" {:>14}", "refused");
      else if (!a.error.empty())
        fmt::print(" {:>14}", "FAILED");
      else
        fmt::print(" {:>14.1f}", a.time_us);
    }
    const AlgoTime* best = r.best();
    const AlgoTime* tuned = r.of(r.tuned);
    std::string ratio = "-";
    if (best && tuned && tuned->refusal.empty() && tuned->error.empty() && best->time_us > 0)
      ratio = fmt::format("{:.2f}", tuned->time_us / best->time_us);
    else if (!tuned && r.tuned)
      ratio = "(not run)";
    fmt::print("  {:<14} {:<14} {:>10}\n", best ? best->spec->name : "-",
               r.tuned ? r.tuned->name : "-", ratio);
  }
  // Refusals and failures, once per algorithm and reason.
  std::vector<std::string> seen;
  for (const auto& r : results)
    for (const auto& a : r.algos) {
      std::string line;
      if (!a.refusal.empty()) line = fmt::format("{} refused: {}", a.spec->name, a.refusal);
      if (!a.error.empty())
        line = fmt::format("{} FAILED at {}: {}", a.spec->name, show_size(r.bytes), a.error);
      if (!line.empty() && std::find(seen.begin(), seen.end(), line) == seen.end()) {
        seen.push_back(line);
        fmt::print("{}\n", line);
      }
    }
}

void print_json(const std::vector<SizeResult>& results, int ranks, int hosts) {
  for (const auto& r : results) {
    std::string algos;
    for (const auto& a : r.algos) {
      if (!algos.empty()) algos += ",";
      algos += json_string(a.spec->name) + ":{";
      if (!a.refusal.empty())
        algos += "\"refused\":" + json_string(a.refusal);
      else if (!a.error.empty())
        algos += "\"error\":" + json_string(a.error);
      else
        algos += fmt::format("\"us\":{:.3f}", a.time_us);
      algos += fmt::format(",\"estimate_us\":{:.3f}}}", a.estimate_us);
    }
    const AlgoTime* best = r.best();
    const AlgoTime* tuned = r.of(r.tuned);
    std::string ratio = "null";
    if (best && tuned && tuned->refusal.empty() && tuned->error.empty() && best->time_us > 0)
      ratio = fmt::format("{:.4f}", tuned->time_us / best->time_us);
    fmt::print(
        "{{\"collective\":\"allreduce\",\"ranks\":{},\"hosts\":{},\"bytes\":{},\"scale\":{},"
        "\"algos\":{{{}}},\"best\":{},\"tuner\":{},\"tuner_vs_best\":{}}}\n",
        ranks, hosts, r.bytes, r.scale, algos, best ? json_string(best->spec->name) : "null",
        r.tuned ? json_string(r.tuned->name) : "null", ratio);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "chorus-sim: predicted time of every allreduce algorithm on a simulated world of many "
      "hosts (the real algorithm code over a transport with a virtual clock), the best, and "
      "the tuner's choice"};
  int ranks = 64, hosts = 8, cores = 0;
  std::string placement = "slot", collective = "allreduce", sizes_text = "8:256M", algo_list;
  double alpha_intra = 0.5, beta_intra = 10, alpha_inter = 10, beta_inter = 1.25, gamma = 5;
  std::string max_real = "256K", segment = "0";
  bool json = false;
  app.add_option("--ranks", ranks, "ranks (threads)")->capture_default_str();
  app.add_option("--hosts", hosts, "simulated hosts")->capture_default_str();
  app.add_option("--placement", placement, "slot: host after host; node: round-robin")
      ->check(CLI::IsMember({"slot", "node"}))
      ->capture_default_str();
  app.add_option("--collective", collective, "only allreduce for now")
      ->check(CLI::IsMember({"allreduce"}))
      ->capture_default_str();
  app.add_option("--sizes", sizes_text, "LO:HI bytes per rank, doubling (8:256M)")
      ->capture_default_str();
  app.add_option("--algo", algo_list, "comma-separated algorithms (default: all)");
  app.add_option("--alpha-intra-us", alpha_intra, "latency within a host")->capture_default_str();
  app.add_option("--beta-intra-gbps", beta_intra, "bandwidth within a host, GB/s")
      ->capture_default_str();
  app.add_option("--alpha-inter-us", alpha_inter, "latency between hosts")->capture_default_str();
  app.add_option("--beta-inter-gbps", beta_inter,
                 "each host's network link, GB/s each way (1.25 = 10 Gbit/s)")
      ->capture_default_str();
  app.add_option("--gamma-gbps", gamma,
                 "reduction speed, GB/s (charged on receives outside the output buffer)")
      ->capture_default_str();
  app.add_option("--cores-per-host", cores, "what the tuner is told (0: as many as ranks)")
      ->capture_default_str();
  app.add_option("--max-real-bytes", max_real,
                 "largest buffer really allocated per rank; larger calls run scaled down")
      ->capture_default_str();
  app.add_option("--segment", segment, "pipeline segment bytes (0: as the communicator chooses)")
      ->capture_default_str();
  app.add_flag("-J,--json", json, "one JSON object per size");
  CLI11_PARSE(app, argc, argv);

  try {
    if (hosts < 1 || hosts > ranks)
      throw chorus::UsageError(CHORUS_ERR_INVALID_ARGUMENT, "--hosts must be 1 to --ranks");
    chorus::sim::World world;
    world.host_of_rank = chorus::sim::place(ranks, hosts, placement);
    world.net.intra = {alpha_intra, 1e-3 / beta_intra};
    world.net.inter = {alpha_inter, 1e-3 / beta_inter};
    world.net.reduce_us_per_byte = gamma > 0 ? 1e-3 / gamma : 0;
    world.cores_per_host = cores;
    world.max_real_bytes = chorus::parse_bytes(max_real);
    world.segment_bytes = chorus::parse_bytes(segment);
    std::vector<const chorus::AlgorithmSpec*> algos;
    if (algo_list.empty()) {
      for (const auto* a : chorus::algorithms_for(chorus::CollectiveKind::allreduce))
        algos.push_back(a);
    } else {
      std::size_t at = 0;
      while (at <= algo_list.size()) {
        const auto comma = std::min(algo_list.find(',', at), algo_list.size());
        const std::string name = algo_list.substr(at, comma - at);
        const auto* a = chorus::find_algorithm(chorus::CollectiveKind::allreduce, name);
        if (!a)
          throw chorus::UsageError(CHORUS_ERR_INVALID_ARGUMENT,
                                   "unknown allreduce algorithm " + name);
        algos.push_back(a);
        at = comma + 1;
      }
    }
    const auto sizes = size_sweep(sizes_text);
    if (!json)
      fmt::print(
          "# allreduce f32 sum, {} ranks on {} hosts ({}), intra {} us / {} GB/s, inter {} us / "
          "{} GB/s per host link, gamma {} GB/s; times in virtual us\n",
          ranks, hosts, placement, alpha_intra, beta_intra, alpha_inter, beta_inter, gamma);
    const auto results = chorus::sim::simulate_allreduce(world, sizes, algos);
    if (json)
      print_json(results, ranks, hosts);
    else
      print_text(results, algos);
  } catch (const std::exception& e) {
    fmt::print(stderr, "chorus-sim: {}\n", e.what());
    return 2;
  }
  return 0;
}
