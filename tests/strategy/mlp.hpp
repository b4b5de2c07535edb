// A small model for the strategy tests, written once for float (what the
// ranks train) and double (the single-process reference): a 2-layer MLP,
// 4 inputs, 8 tanh units, 1 output, mean squared error over a batch that
// changes every step. Its four variables have 32, 8, 8 and 1 elements.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace chorus::test {

constexpr std::size_t kInputs = 4, kHidden = 8;
constexpr std::size_t kBatch = 12;  // the global batch: 6 per rank on 2 ranks, 4 on 3

// Names and sizes in registration order.
inline const std::vector<std::string>& mlp_names() {
  static const std::vector<std::string> names{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  return names;
}
inline std::vector<std::size_t> mlp_sizes() {
  return {kHidden * kInputs, kHidden, kHidden, 1};
}

template <typename T>
struct Mlp {
  std::vector<std::vector<T>> vars;  // mlp_names() order

  static Mlp zeros() {
    Mlp m;
    for (std::size_t n : mlp_sizes()) m.vars.emplace_back(n, T(0));
    return m;
  }
  // Initial values that differ from rank to rank (broadcast_variables makes
  // them rank 0's).
  static Mlp initial(int rank) {
    Mlp m = zeros();
    for (std::size_t v = 0; v < m.vars.size(); ++v)
      for (std::size_t i = 0; i < m.vars[v].size(); ++i)
        m.vars[v][i] = T(0.5 * std::sin(0.7 * double(i) + 1.3 * rank + 2.1 * double(v)));
    return m;
  }
};

// Sample s of the global batch of `step`, and its target.
inline double input(int step, std::size_t s, std::size_t k) {
  return std::cos(0.37 * double(s) + 1.1 * double(k) + 0.9 * step);
}
inline double target(int step, std::size_t s) {
  return 0.8 * std::sin(1.7 * double(s) + 0.5 * step);
}

// The loss over samples [begin, end) of the batch (the mean of
// 0.5 * (y - t)^2), and its gradient into grads (overwritten).
template <typename T>
T loss_and_gradients(const Mlp<T>& m, int step, std::size_t begin, std::size_t end, Mlp<T>& grads) {
  const auto &w1 = m.vars[0], &b1 = m.vars[1], &w2 = m.vars[2], &b2 = m.vars[3];
  for (auto& g : grads.vars) std::fill(g.begin(), g.end(), T(0));
  const T scale = T(1) / T(end - begin);
  T loss = 0;
  for (std::size_t s = begin; s < end; ++s) {
    T x[kInputs], h[kHidden];
    for (std::size_t k = 0; k < kInputs; ++k) x[k] = T(input(step, s, k));
    T y = b2[0];
    for (std::size_t j = 0; j < kHidden; ++j) {
      T z = b1[j];
      for (std::size_t k = 0; k < kInputs; ++k) z += w1[j * kInputs + k] * x[k];
      h[j] = std::tanh(z);
      y += w2[j] * h[j];
    }
    const T err = y - T(target(step, s));
    loss += scale * T(0.5) * err * err;
    const T dy = scale * err;
    grads.vars[3][0] += dy;
    for (std::size_t j = 0; j < kHidden; ++j) {
      grads.vars[2][j] += dy * h[j];
      const T dz = dy * w2[j] * (T(1) - h[j] * h[j]);
      grads.vars[1][j] += dz;
      for (std::size_t k = 0; k < kInputs; ++k) grads.vars[0][j * kInputs + k] += dz * x[k];
    }
  }
  return loss;
}

}  // namespace chorus::test
