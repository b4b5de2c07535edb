// The mirrored strategy through the C API on thread ranks (tests/api/
// api_harness.hpp) over shared memory and TCP: a small MLP trained on every
// rank's slice of a global batch, bit-identical on every rank after every
// step and equal to a float64 single-process run on the whole batch within a
// tolerance, with and without the fusion engine, for SGD, momentum and Adam.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "include/chorus.h"
#include "tests/api/api_harness.hpp"
#include "tests/strategy/mlp.hpp"
#include "tests/strategy/reference_optimizer.hpp"
#include "tests/strategy/reference_training.hpp"

using chorus::test::all_zero;
using chorus::test::flatten;
using chorus::test::kBatch;
using chorus::test::loss_and_gradients;
using chorus::test::Mlp;
using chorus::test::mlp_names;
using chorus::test::reference_run;
using chorus::test::run;

namespace {

constexpr int kSteps = 5;

bool register_mlp(chorus_mirrored_t m, Mlp<float>& vars, Mlp<float>& grads) {
  for (std::size_t v = 0; v < vars.vars.size(); ++v)
    if (chorus_mirrored_add_variable(m, mlp_names()[v].c_str(), vars.vars[v].data(),
                                     grads.vars[v].data(), vars.vars[v].size(),
                                     CHORUS_FLOAT32) != CHORUS_SUCCESS)
      return false;
  return true;
}

// Trains on n thread ranks and compares every step with the reference.
void train_and_compare(const char* transport, int n, bool fusion,
                       const chorus_optimizer_options_t& optimizer) {
  std::vector<std::vector<double>> reference;
  std::vector<double> reference_loss, initial;
  reference_run(optimizer, kSteps, reference, reference_loss, initial);

  std::vector<std::vector<std::vector<float>>> snapshots(n);
  std::vector<std::vector<float>> losses(n);
  std::vector<std::string> notes(n);
  auto results = run(
      n,
      [&](int rank, chorus_comm_t comm) -> int {
        auto note = [&](const std::string& what) {
          notes[rank] = what + ": " + chorus_comm_last_error(comm);
        };
        Mlp<float> vars = Mlp<float>::initial(rank), grads = Mlp<float>::zeros();
        chorus_mirrored_options_t options = CHORUS_MIRRORED_OPTIONS_INITIALIZER;
        options.use_fusion = fusion ? 1 : 0;
        options.check_replicas = 1;  // and the check passes every step
        chorus_mirrored_t m = nullptr;
        if (chorus_mirrored_create(comm, &options, &m)) return note("create"), 1;
        if (!register_mlp(m, vars, grads)) return note("add_variable"), 2;
        if (chorus_mirrored_broadcast_variables(m, 0)) return note("broadcast"), 3;
        const std::size_t slice = kBatch / std::size_t(n);
        for (int step = 0; step < kSteps; ++step) {
          float loss = loss_and_gradients(vars, step, slice * std::size_t(rank),
                                          slice * std::size_t(rank + 1), grads);
          // A different order on every rank (as backward passes finish
          // differently), one gradient left for reduce_gradients, and the
          // program's own collective (the loss for its log) in between.
          std::vector<std::size_t> order{3, 2, 1, 0};
          std::rotate(order.begin(), order.begin() + rank % 4, order.end());
          if (rank % 2) std::reverse(order.begin(), order.end());
          const std::size_t left_out = std::size_t(rank + step) % 4;
          for (std::size_t k = 0; k < order.size(); ++k) {
            if (k == 2 && chorus_allreduce(comm, &loss, &loss, 1, CHORUS_FLOAT32, CHORUS_AVG, 0))
              return note("loss allreduce"), 4;
            if (order[k] == left_out) continue;
            if (chorus_mirrored_gradient_ready(m, mlp_names()[order[k]].c_str()))
              return note("gradient_ready"), 5;
          }
          if (chorus_mirrored_reduce_gradients(m, 0)) return note("reduce_gradients"), 6;
          if (chorus_mirrored_apply(m, &optimizer)) return note("apply"), 7;
          if (chorus_mirrored_end_step(m, 0)) return note("end_step"), 8;
          snapshots[rank].push_back(flatten(vars));
          losses[rank].push_back(loss);
        }
        return chorus_mirrored_destroy(m) == CHORUS_SUCCESS ? 0 : 9;
      },
      transport);
  for (int r = 0; r < n; ++r) INFO("rank " << r << ": " << notes[r]);
  for (int r = 0; r < n; ++r) CHECK(notes[r] == "");
  REQUIRE(all_zero(results));
  for (int r = 0; r < n; ++r) REQUIRE(snapshots[r].size() == std::size_t(kSteps));
  for (int step = 0; step < kSteps; ++step) {
    INFO("step " << step);
    const auto& mine = snapshots[0][step];
    REQUIRE(mine.size() == reference[step].size());
    // Bit-for-bit the same on every rank.
    for (int r = 1; r < n; ++r) {
      INFO("rank " << r);
      CHECK(std::memcmp(snapshots[r][step].data(), mine.data(), mine.size() * sizeof(float)) == 0);
    }
    // And the single-process model's, within float32's rounding.
    for (std::size_t i = 0; i < mine.size(); ++i) {
      INFO("element " << i);
      REQUIRE(double(mine[i]) == Approx(reference[step][i]).epsilon(1e-4).margin(1e-5));
    }
    for (int r = 0; r < n; ++r)
      CHECK(double(losses[r][step]) == Approx(reference_loss[step]).epsilon(1e-5));
  }
  // The comparison is worth something: the model moved far beyond the tolerance.
  double moved = 0;
  for (std::size_t i = 0; i < initial.size(); ++i)
    moved = std::max(moved, std::abs(reference.back()[i] - initial[i]));
  CHECK(moved > 0.02);
}

}  // namespace

TEST_CASE("mirrored: an MLP trains identically on every rank and as on one process", "[mirrored]") {
  for (const char* transport : {static_cast<const char*>(nullptr), "tcp"})
    for (int n : {2, 3})
      for (bool fusion : {true, false})
        for (int kind : {CHORUS_OPTIMIZER_SGD, CHORUS_OPTIMIZER_MOMENTUM, CHORUS_OPTIMIZER_ADAM}) {
          chorus_optimizer_options_t o = CHORUS_OPTIMIZER_OPTIONS_INITIALIZER;
          o.kind = static_cast<chorus_optimizer_kind_t>(kind);
          if (kind == CHORUS_OPTIMIZER_SGD) {
            o.learning_rate = 0.1;
            o.weight_decay = 0.01;
          } else if (kind == CHORUS_OPTIMIZER_MOMENTUM) {
            o.learning_rate = 0.05;
            o.momentum = 0.9;
            o.nesterov = n == 3;
          } else {
            o.learning_rate = 0.01;
            o.weight_decay = n == 3 ? 0.01 : 0.0;
          }
          DYNAMIC_SECTION((transport ? transport : "shm")
                          << ", " << n << " ranks, " << (fusion ? "fusion" : "grouped") << ", "
                          << (kind == 0   ? "sgd"
                              : kind == 1 ? "momentum"
                                          : "adam")) {
            train_and_compare(transport, n, fusion, o);
          }
        }
}
