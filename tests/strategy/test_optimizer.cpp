// The optimizers (lib/strategy/optimizer.hpp) alone: values worked out by
// hand for a few steps, random variables against the float64 reference of
// reference_optimizer.hpp (float64 to rounding, float32 within a tolerance),
// and the refusals.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/core/error.hpp"
#include "lib/strategy/optimizer.hpp"
#include "tests/strategy/reference_optimizer.hpp"

using chorus::DataType;
using chorus::strategy::OptimizerKind;
using chorus::strategy::OptimizerOptions;
using chorus::strategy::OptimizerState;
using chorus::test::RefKind;
using chorus::test::RefOptimizer;
using chorus::test::RefState;

namespace {

// Runs steps of `options` on one double variable with a gradient per step.
std::vector<double> trajectory(const OptimizerOptions& options, double start,
                               const std::vector<double>& grads) {
  OptimizerState state(options.kind, DataType::f64, 1);
  std::vector<double> out;
  double p = start;
  for (double g : grads) {
    state.step(options, std::span<double>(&p, 1), std::span<const double>(&g, 1));
    out.push_back(p);
  }
  return out;
}

std::string refusal_of(const OptimizerOptions& options) {
  try {
    chorus::strategy::validate(options);
  } catch (const chorus::UsageError& e) {
    CHECK(e.code() == CHORUS_ERR_INVALID_ARGUMENT);
    return e.what();
  }
  return "";
}

RefOptimizer reference_of(const OptimizerOptions& o) {
  RefOptimizer r;
  r.kind = o.kind == OptimizerKind::sgd        ? RefKind::sgd
           : o.kind == OptimizerKind::momentum ? RefKind::momentum
                                               : RefKind::adam;
  r.lr = o.learning_rate;
  r.momentum = o.momentum;
  r.nesterov = o.nesterov;
  r.beta1 = o.beta1;
  r.beta2 = o.beta2;
  r.eps = o.epsilon;
  r.weight_decay = o.weight_decay;
  return r;
}

}  // namespace

TEST_CASE("optimizer: SGD, by hand", "[optimizer]") {
  OptimizerOptions o;
  o.learning_rate = 0.1;
  // p = 1, g = 0.5: 1 - 0.05 = 0.95, then 0.9.
  auto p = trajectory(o, 1.0, {0.5, 0.5});
  CHECK(p[0] == Approx(0.95).epsilon(1e-15));
  CHECK(p[1] == Approx(0.9).epsilon(1e-15));
  // Weight decay 0.1: g = 0.5 + 0.1 * 1 = 0.6 -> 0.94; g = 0.5 + 0.094 -> 0.94 - 0.0594 = 0.8806.
  o.weight_decay = 0.1;
  p = trajectory(o, 1.0, {0.5, 0.5});
  CHECK(p[0] == Approx(0.94).epsilon(1e-15));
  CHECK(p[1] == Approx(0.8806).epsilon(1e-15));
}

TEST_CASE("optimizer: momentum and Nesterov, by hand", "[optimizer]") {
  OptimizerOptions o;
  o.kind = OptimizerKind::momentum;
  o.learning_rate = 0.1;
  o.momentum = 0.9;
  // g = 1 each step: buf 1, 1.9, 2.71; p 0.9, 0.71, 0.439.
  auto p = trajectory(o, 1.0, {1, 1, 1});
  CHECK(p[0] == Approx(0.9).epsilon(1e-15));
  CHECK(p[1] == Approx(0.71).epsilon(1e-15));
  CHECK(p[2] == Approx(0.439).epsilon(1e-14));
  // Nesterov: direction g + 0.9 * buf = 1.9, 2.71, 3.439; p 0.81, 0.539, 0.1951.
  o.nesterov = true;
  p = trajectory(o, 1.0, {1, 1, 1});
  CHECK(p[0] == Approx(0.81).epsilon(1e-15));
  CHECK(p[1] == Approx(0.539).epsilon(1e-14));
  CHECK(p[2] == Approx(0.1951).epsilon(1e-13));
}

TEST_CASE("optimizer: Adam, by hand", "[optimizer]") {
  OptimizerOptions o;
  o.kind = OptimizerKind::adam;
  o.learning_rate = 0.1;
  // A constant gradient: m_hat = g, v_hat = g^2, so each step moves
  // lr * g / (|g| + eps) = 0.1 * (1 - 2e-8) for g = 0.5.
  auto p = trajectory(o, 1.0, {0.5, 0.5, 0.5});
  CHECK(p[0] == Approx(0.900000002).epsilon(1e-14));
  CHECK(p[1] == Approx(0.800000004).epsilon(1e-14));
  CHECK(p[2] == Approx(0.700000006).epsilon(1e-14));
  // Gradients 0.5, -1, 0.25 (worked through with a calculator):
  //   t=2: m = -0.055, v = 0.00124975, m_hat = -0.289474, v_hat = 0.625188 -> 0.936610354
  //   t=3: m = -0.0245, v = 0.00131100025, m_hat = -0.090406, v_hat = 0.437440 -> 0.950279420
  p = trajectory(o, 1.0, {0.5, -1.0, 0.25});
  CHECK(p[0] == Approx(0.900000002).epsilon(1e-14));
  CHECK(p[1] == Approx(0.9366103542405654).epsilon(1e-13));
  CHECK(p[2] == Approx(0.9502794203389762).epsilon(1e-13));
}

TEST_CASE("optimizer: against the float64 reference, float64 and float32", "[optimizer]") {
  struct Case {
    const char* name;
    OptimizerOptions options;
  };
  std::vector<Case> cases(6);
  cases[0] = {"sgd", {}};
  cases[0].options.learning_rate = 0.05;
  cases[1] = {"sgd + weight decay", cases[0].options};
  cases[1].options.weight_decay = 0.01;
  cases[2] = {"momentum", {}};
  cases[2].options.kind = OptimizerKind::momentum;
  cases[2].options.learning_rate = 0.05;
  cases[2].options.momentum = 0.9;
  cases[3] = {"nesterov + weight decay", cases[2].options};
  cases[3].options.nesterov = true;
  cases[3].options.weight_decay = 0.001;
  cases[4] = {"adam", {}};
  cases[4].options.kind = OptimizerKind::adam;
  cases[4].options.learning_rate = 0.01;
  cases[5] = {"adam + weight decay, other betas", cases[4].options};
  cases[5].options.beta1 = 0.8;
  cases[5].options.beta2 = 0.99;
  cases[5].options.epsilon = 1e-6;
  cases[5].options.weight_decay = 0.05;

  const std::size_t n = 1000;
  const int steps = 10;
  for (const auto& c : cases) {
    INFO(c.name);
    std::mt19937 rng(42);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> start(n);
    for (auto& x : start) x = normal(rng);
    std::vector<double> ref = start, p64 = start;
    std::vector<float> p32(start.begin(), start.end());
    RefState ref_state(n);
    OptimizerState s64(c.options.kind, DataType::f64, n), s32(c.options.kind, DataType::f32, n);
    double moved = 0;
    for (int step = 0; step < steps; ++step) {
      std::vector<double> g(n);
      for (auto& x : g) x = normal(rng) * 0.5;
      // The float32 path gets the float32-rounded gradient; the reference
      // too, so only the optimizer's own arithmetic differs.
      std::vector<float> g32(g.begin(), g.end());
      std::vector<double> g_rounded(g32.begin(), g32.end());
      ref_state.step(reference_of(c.options), ref, g_rounded);
      s64.step(c.options, std::span<double>(p64), std::span<const double>(g_rounded));
      s32.step(c.options, std::span<float>(p32), std::span<const float>(g32));
      for (std::size_t i = 0; i < n; ++i) {
        INFO("step " << step << " element " << i);
        REQUIRE(p64[i] == Approx(ref[i]).epsilon(1e-12).margin(1e-14));
        REQUIRE(double(p32[i]) == Approx(ref[i]).epsilon(1e-5).margin(1e-5));
      }
    }
    for (std::size_t i = 0; i < n; ++i) moved = std::max(moved, std::abs(ref[i] - start[i]));
    // The comparison means something: the variables moved far more than the tolerance.
    CHECK(moved > 0.05);
    CHECK(s64.steps() == steps);
  }
}

TEST_CASE("optimizer: untyped memory, as the strategy calls it", "[optimizer]") {
  OptimizerOptions o;
  o.kind = OptimizerKind::momentum;
  o.learning_rate = 0.5;
  o.momentum = 0.5;
  float p[3] = {1, 2, 3};
  const float g[3] = {1, 1, 1};
  OptimizerState state(o.kind, DataType::f32, 3);
  state.step(o, p, g);  // buf 1 -> p - 0.5
  state.step(o, p, g);  // buf 1.5 -> p - 0.75
  CHECK(p[0] == -0.25f);
  CHECK(p[1] == 0.75f);
  CHECK(p[2] == 1.75f);
}

TEST_CASE("optimizer: refusals", "[optimizer]") {
  OptimizerOptions o;
  CHECK(refusal_of(o) == "");
  o.learning_rate = -1;
  CHECK(refusal_of(o).find("learning_rate -1") != std::string::npos);
  o.learning_rate = NAN;
  CHECK(refusal_of(o).find("learning_rate") != std::string::npos);
  o = {};
  o.weight_decay = INFINITY;
  CHECK(refusal_of(o).find("weight_decay") != std::string::npos);
  o = {};
  o.kind = OptimizerKind::momentum;
  o.momentum = -0.5;
  CHECK(refusal_of(o).find("momentum -0.5") != std::string::npos);
  o.momentum = 0;
  o.nesterov = true;
  CHECK(refusal_of(o).find("nesterov") != std::string::npos);
  o = {};
  o.kind = OptimizerKind::adam;
  o.beta1 = 1.0;
  CHECK(refusal_of(o).find("beta1 1") != std::string::npos);
  o.beta1 = 0.9;
  o.beta2 = -0.1;
  CHECK(refusal_of(o).find("beta2") != std::string::npos);
  o.beta2 = 0.999;
  o.epsilon = -1e-8;
  CHECK(refusal_of(o).find("epsilon") != std::string::npos);
  // The fields a kind does not use are not checked (SGD with Adam's betas out of range).
  o = {};
  o.beta1 = 5;
  CHECK(refusal_of(o) == "");
  o.kind = static_cast<OptimizerKind>(7);
  CHECK(refusal_of(o).find("unknown kind 7") != std::string::npos);

  CHECK_THROWS_AS(OptimizerState(OptimizerKind::sgd, DataType::i32, 4), chorus::UsageError);
  CHECK_THROWS_WITH(OptimizerState(OptimizerKind::sgd, DataType::f16, 4),
                    Catch::Contains("float32 and float64 only, not float16"));
  OptimizerState state(OptimizerKind::sgd, DataType::f32, 4);
  std::vector<float> p(4), g(3);
  std::vector<double> pd(4), gd(4);
  OptimizerOptions sgd;
  CHECK_THROWS_WITH(state.step(sgd, std::span<float>(p), std::span<const float>(g)),
                    Catch::Contains("4 elements given a variable of 4 and a gradient of 3"));
  CHECK_THROWS_WITH(state.step(sgd, std::span<double>(pd), std::span<const double>(gd)),
                    Catch::Contains("made for float32 given float64"));
  OptimizerOptions adam;
  adam.kind = OptimizerKind::adam;
  g.resize(4);
  CHECK_THROWS_WITH(state.step(adam, std::span<float>(p), std::span<const float>(g)),
                    Catch::Contains("made for sgd given adam"));
  CHECK(state.steps() == 0);
}
