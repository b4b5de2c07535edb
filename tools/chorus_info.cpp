// chorus-info: what Chorus would do here.
//   chorus-info --config           every CHORUS_* variable: value, default, doc
//   chorus-info --plan [--np N] [--ranks-on-host M]
//                                  the allreduce algorithm per size and why
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>

#include "collectives/tuner/selection.hpp"
#include "lib/core/config.hpp"
#include "lib/core/error.hpp"

namespace {

void print_config(const chorus::Config& config) {
  for (const auto& var : chorus::config_registry()) {
    fmt::print("{:<28} = {:<12} (default {})\n    {}\n", var.name, var.show(config),
               var.default_value, var.doc);
  }
}

void print_plan(const chorus::Config& config, int ranks, int ranks_on_host) {
  auto user = chorus::AlgoOverride::parse(config.algo);
  auto model = chorus::CostModel::defaults(ranks_on_host, chorus::online_cores());
  fmt::print("allreduce plan for {} ranks ({} on this host, {} cores){}\n", ranks, ranks_on_host,
             chorus::online_cores(), user.empty() ? "" : ", with CHORUS_ALGO");
  fmt::print("{:>10}  {:<20} {:>8}  {}\n", "bytes", "algorithm", "segment", "why");
  for (std::size_t bytes = 8; bytes <= (std::size_t(1) << 30); bytes *= 4) {
    auto choice =
        chorus::choose_algorithm(chorus::CollectiveKind::allreduce, bytes, ranks, user, model);
    auto segment = chorus::ring_segment_bytes(bytes, ranks, model, config.segment_bytes);
    fmt::print("{:>10}  {:<20} {:>8}  {}\n", chorus::format_bytes(bytes), choice.algo,
               choice.algo == "ring" ? chorus::format_bytes(segment) : "-", choice.why());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chorus-info: configuration and algorithm plans of Chorus"};
  bool config_flag = false, plan_flag = false;
  int ranks = 2, ranks_on_host = 0;
  app.add_flag("--config", config_flag, "Print every CHORUS_* variable with its value and doc");
  app.add_flag("--plan", plan_flag, "Print the allreduce algorithm chosen per size, and why");
  app.add_option("-n,--np,--ranks", ranks, "Ranks in the job (for --plan)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--ranks-on-host", ranks_on_host, "Ranks on this host (default: all)");
  CLI11_PARSE(app, argc, argv);
  try {
    const auto& config = chorus::global_config();
    if (!config_flag && !plan_flag) config_flag = true;
    if (config_flag) print_config(config);
    if (plan_flag) print_plan(config, ranks, ranks_on_host > 0 ? ranks_on_host : ranks);
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "chorus-info: %s\n", e.what());
    return 2;
  }
  return 0;
}
