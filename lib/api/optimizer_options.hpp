// The C optimizer options (include/chorus.h) as the strategies' C++ ones,
// checked at the C boundary; `call` names the entry point in errors.
#pragma once

#include <fmt/format.h>

#include "lib/api/entry.hpp"
#include "lib/strategy/optimizer.hpp"

namespace chorus::api {

static_assert(static_cast<int>(strategy::OptimizerKind::sgd) == CHORUS_OPTIMIZER_SGD);
static_assert(static_cast<int>(strategy::OptimizerKind::momentum) == CHORUS_OPTIMIZER_MOMENTUM);
static_assert(static_cast<int>(strategy::OptimizerKind::adam) == CHORUS_OPTIMIZER_ADAM);
static_assert(strategy::kOptimizerKinds == CHORUS_OPTIMIZER_KIND_COUNT_);

inline strategy::OptimizerOptions optimizer_options(const chorus_optimizer_options_t* options,
                                                    const char* call) {
  check_out(options, fmt::format("{}: optimizer", call).c_str());
  if (options->size < sizeof(chorus_optimizer_options_t))
    throw UsageError(
        fmt::format("{}: optimizer->size {} (expected {}); start it with "
                    "CHORUS_OPTIMIZER_OPTIONS_INITIALIZER",
                    call, options->size, sizeof(chorus_optimizer_options_t)));
  const int kind = static_cast<int>(options->kind);
  if (kind < 0 || kind >= CHORUS_OPTIMIZER_KIND_COUNT_)
    throw UsageError(fmt::format("{}: unknown optimizer kind {}", call, kind));
  strategy::OptimizerOptions o;
  o.kind = static_cast<strategy::OptimizerKind>(kind);
  o.learning_rate = options->learning_rate;
  o.momentum = options->momentum;
  o.nesterov = options->nesterov != 0;
  o.beta1 = options->beta1;
  o.beta2 = options->beta2;
  o.epsilon = options->epsilon;
  o.weight_decay = options->weight_decay;
  return o;
}

}  // namespace chorus::api
