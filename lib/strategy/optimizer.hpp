// Optimizers: one update of a variable from its gradient, on float32 and
// float64 memory, with the semantics of PyTorch's torch.optim (so that a
// model trained here follows the same trajectory as there):
//
//   every kind   g = grad + weight_decay * param        (L2, not decoupled)
//   sgd          param -= lr * g
//   momentum     buf = momentum * buf + g               (buf starts at 0)
//                param -= lr * (nesterov ? g + momentum * buf : buf)
//   adam         t += 1
//                m = beta1 * m + (1 - beta1) * g
//                v = beta2 * v + (1 - beta2) * g * g
//                param -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + epsilon)
//
// Arithmetic is in the variable's own type (the hyperparameters and bias
// corrections rounded to it), as PyTorch's is; the state (buf, m, v) has the
// variable's type too. Nothing here knows of communicators: the mirrored
// strategy and a parameter server both keep one OptimizerState per variable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "base/core/dtype.hpp"

namespace chorus::strategy {

// The values are chorus_optimizer_kind_t's.
enum class OptimizerKind : uint8_t { sgd = 0, momentum = 1, adam = 2 };
inline constexpr int kOptimizerKinds = 3;

std::string_view optimizer_name(OptimizerKind kind);  // "sgd", "momentum", "adam"

// The fields a kind does not use are ignored (the defaults are PyTorch's).
struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::sgd;
  double learning_rate = 0.01;
  double momentum = 0;      // momentum: the buffer's decay; 0 makes it plain SGD
  bool nesterov = false;    // momentum: Nesterov's look-ahead (needs momentum > 0)
  double beta1 = 0.9;       // adam: decay of the first moment, in [0, 1)
  double beta2 = 0.999;     // adam: decay of the second moment, in [0, 1)
  double epsilon = 1e-8;    // adam: added to the denominator after the square root
  double weight_decay = 0;  // every kind: L2 penalty added to the gradient
};

// Throws UsageError (CHORUS_ERR_INVALID_ARGUMENT) naming the first field out
// of its range (negative, not finite, a beta of 1 or more, nesterov without
// momentum), as PyTorch's constructors refuse them.
void validate(const OptimizerOptions& options);

// An optimizer's memory of one variable: the momentum buffer, Adam's moments
// and step count. Made for one kind, dtype and element count.
class OptimizerState {
 public:
  // dtype float32 or float64, else UsageError.
  OptimizerState(OptimizerKind kind, DataType dtype, std::size_t count);

  OptimizerKind kind() const { return kind_; }
  DataType dtype() const { return dtype_; }
  std::size_t count() const { return count_; }
  // Updates applied so far (Adam's t).
  int64_t steps() const { return steps_; }

  // One update of param from grad (grad is only read). Throws UsageError
  // when the spans' sizes differ from count(), the type from dtype() or
  // options.kind from kind(); validate(options) is the caller's.
  void step(const OptimizerOptions& options, std::span<float> param, std::span<const float> grad);
  void step(const OptimizerOptions& options, std::span<double> param, std::span<const double> grad);
  // The same on untyped memory of dtype() holding count() elements each.
  void step(const OptimizerOptions& options, void* param, const void* grad);

 private:
  template <typename T>
  struct Moments {
    std::vector<T> first;   // momentum: buf; adam: m
    std::vector<T> second;  // adam: v
  };
  template <typename T>
  void update(const OptimizerOptions& options, T* param, const T* grad);
  void check(const OptimizerOptions& options, DataType dtype, std::size_t param_count,
             std::size_t grad_count) const;

  OptimizerKind kind_;
  DataType dtype_;
  std::size_t count_;
  int64_t steps_ = 0;
  std::variant<Moments<float>, Moments<double>> moments_;
};

}  // namespace chorus::strategy
