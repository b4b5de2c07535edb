// The single-process reference the strategy tests train against: the MLP
// of mlp.hpp in float64 on the whole batch, with the reference optimizer.
#pragma once

#include <vector>

#include "include/chorus.h"
#include "tests/strategy/mlp.hpp"
#include "tests/strategy/reference_optimizer.hpp"

namespace chorus::test {

inline RefOptimizer reference_of(const chorus_optimizer_options_t& o) {
  RefOptimizer r;
  r.kind = o.kind == CHORUS_OPTIMIZER_SGD        ? RefKind::sgd
           : o.kind == CHORUS_OPTIMIZER_MOMENTUM ? RefKind::momentum
                                                 : RefKind::adam;
  r.lr = o.learning_rate;
  r.momentum = o.momentum;
  r.nesterov = o.nesterov != 0;
  r.beta1 = o.beta1;
  r.beta2 = o.beta2;
  r.eps = o.epsilon;
  r.weight_decay = o.weight_decay;
  return r;
}

template <typename T>
std::vector<T> flatten(const Mlp<T>& m) {
  std::vector<T> out;
  for (const auto& v : m.vars) out.insert(out.end(), v.begin(), v.end());
  return out;
}

// The single-process run: float64, the whole batch, the reference optimizer,
// from rank 0's initial values. Per step: the variables and the loss before
// the update.
inline void reference_run(const chorus_optimizer_options_t& options, int steps,
                          std::vector<std::vector<double>>& after, std::vector<double>& losses,
                          std::vector<double>& initial) {
  const Mlp<float> start = Mlp<float>::initial(0);
  Mlp<double> m = Mlp<double>::zeros();
  for (std::size_t v = 0; v < m.vars.size(); ++v)
    m.vars[v].assign(start.vars[v].begin(), start.vars[v].end());
  initial = flatten(m);
  Mlp<double> grads = Mlp<double>::zeros();
  std::vector<RefState> states;
  for (const auto& v : m.vars) states.emplace_back(v.size());
  for (int step = 0; step < steps; ++step) {
    losses.push_back(loss_and_gradients(m, step, 0, kBatch, grads));
    for (std::size_t v = 0; v < m.vars.size(); ++v)
      states[v].step(reference_of(options), m.vars[v], grads.vars[v]);
    after.push_back(flatten(m));
  }
}

}  // namespace chorus::test
