#include "lib/strategy/optimizer.hpp"

#include <fmt/format.h>

#include <cmath>

#include "base/core/error.hpp"

namespace chorus::strategy {
namespace {

void require_finite_at_least_zero(double value, const char* field) {
  if (!std::isfinite(value) || value < 0)
    throw UsageError(
        fmt::format("optimizer: {} {} is out of range (a finite value >= 0)", field, value));
}

void require_beta(double value, const char* field) {
  if (!std::isfinite(value) || value < 0 || value >= 1)
    throw UsageError(fmt::format("optimizer: {} {} is out of range [0, 1)", field, value));
}

}  // namespace

std::string_view optimizer_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::sgd:
      return "sgd";
    case OptimizerKind::momentum:
      return "momentum";
    case OptimizerKind::adam:
      return "adam";
  }
  return "unknown";
}

void validate(const OptimizerOptions& options) {
  if (static_cast<int>(options.kind) >= kOptimizerKinds)
    throw UsageError(fmt::format("optimizer: unknown kind {}", static_cast<int>(options.kind)));
  require_finite_at_least_zero(options.learning_rate, "learning_rate");
  require_finite_at_least_zero(options.weight_decay, "weight_decay");
  if (options.kind == OptimizerKind::momentum) {
    require_finite_at_least_zero(options.momentum, "momentum");
    if (options.nesterov && options.momentum == 0)
      throw UsageError("optimizer: nesterov needs a momentum above 0");
  }
  if (options.kind == OptimizerKind::adam) {
    require_beta(options.beta1, "beta1");
    require_beta(options.beta2, "beta2");
    require_finite_at_least_zero(options.epsilon, "epsilon");
  }
}

OptimizerState::OptimizerState(OptimizerKind kind, DataType dtype, std::size_t count)
    : kind_(kind), dtype_(dtype), count_(count) {
  if (dtype != DataType::f32 && dtype != DataType::f64)
    throw UsageError(fmt::format(
        "optimizer: the optimizers update float32 and float64 only, not {}", dtype_name(dtype)));
  // Only the state the kind uses is allocated: plain SGD keeps none.
  const std::size_t first = kind == OptimizerKind::sgd ? 0 : count;
  const std::size_t second = kind == OptimizerKind::adam ? count : 0;
  if (dtype == DataType::f32)
    moments_ = Moments<float>{std::vector<float>(first), std::vector<float>(second)};
  else
    moments_ = Moments<double>{std::vector<double>(first), std::vector<double>(second)};
}

void OptimizerState::check(const OptimizerOptions& options, DataType dtype, std::size_t param_count,
                           std::size_t grad_count) const {
  if (options.kind != kind_)
    throw UsageError(
        fmt::format("optimizer: state made for {} given {} options (one optimizer "
                    "kind per state)",
                    optimizer_name(kind_), optimizer_name(options.kind)));
  if (dtype != dtype_)
    throw UsageError(fmt::format("optimizer: state made for {} given {} data", dtype_name(dtype_),
                                 dtype_name(dtype)));
  if (param_count != count_ || grad_count != count_)
    throw UsageError(fmt::format(
        "optimizer: state made for {} elements given a variable of {} and a gradient of {}", count_,
        param_count, grad_count));
}

void OptimizerState::step(const OptimizerOptions& options, std::span<float> param,
                          std::span<const float> grad) {
  check(options, DataType::f32, param.size(), grad.size());
  update<float>(options, param.data(), grad.data());
}

void OptimizerState::step(const OptimizerOptions& options, std::span<double> param,
                          std::span<const double> grad) {
  check(options, DataType::f64, param.size(), grad.size());
  update<double>(options, param.data(), grad.data());
}

void OptimizerState::step(const OptimizerOptions& options, void* param, const void* grad) {
  check(options, dtype_, count_, count_);
  if (dtype_ == DataType::f32)
    update<float>(options, static_cast<float*>(param), static_cast<const float*>(grad));
  else
    update<double>(options, static_cast<double*>(param), static_cast<const double*>(grad));
}

template <typename T>
void OptimizerState::update(const OptimizerOptions& options, T* param, const T* grad) {
  auto& moments = std::get<Moments<T>>(moments_);
  ++steps_;
  const T lr = static_cast<T>(options.learning_rate);
  const T decay = static_cast<T>(options.weight_decay);
  switch (kind_) {
    case OptimizerKind::sgd:
      for (std::size_t i = 0; i < count_; ++i) param[i] -= lr * (grad[i] + decay * param[i]);
      return;
    case OptimizerKind::momentum: {
      const T mu = static_cast<T>(options.momentum);
      T* buf = moments.first.data();
      for (std::size_t i = 0; i < count_; ++i) {
        const T g = grad[i] + decay * param[i];
        buf[i] = mu * buf[i] + g;
        param[i] -= lr * (options.nesterov ? g + mu * buf[i] : buf[i]);
      }
      return;
    }
    case OptimizerKind::adam: {
      // The bias corrections in double (t may be large; beta^t underflows
      // gracefully), then rounded to T as PyTorch's Python floats are.
      const double t = static_cast<double>(steps_);
      const T step_size = static_cast<T>(options.learning_rate / (1 - std::pow(options.beta1, t)));
      const T correction2_sqrt = static_cast<T>(std::sqrt(1 - std::pow(options.beta2, t)));
      const T beta1 = static_cast<T>(options.beta1), beta2 = static_cast<T>(options.beta2);
      const T one_minus_beta1 = static_cast<T>(1 - options.beta1);
      const T one_minus_beta2 = static_cast<T>(1 - options.beta2);
      const T eps = static_cast<T>(options.epsilon);
      T* m = moments.first.data();
      T* v = moments.second.data();
      for (std::size_t i = 0; i < count_; ++i) {
        const T g = grad[i] + decay * param[i];
        m[i] = beta1 * m[i] + one_minus_beta1 * g;
        v[i] = beta2 * v[i] + one_minus_beta2 * g * g;
        const T denom = std::sqrt(v[i]) / correction2_sqrt + eps;
        param[i] -= step_size * (m[i] / denom);
      }
      return;
    }
  }
}

}  // namespace chorus::strategy
