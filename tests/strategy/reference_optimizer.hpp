// An independent float64 reference of the optimizers, written from the
// textbook forms rather than from lib/strategy/optimizer.cpp's: Adam as in
// Kingma and Ba (bias-corrected m_hat and v_hat, epsilon after the square
// root; equal to PyTorch's step_size / denom rearrangement), SGD with
// momentum as PyTorch documents it (the buffer starts as the first
// gradient). The tests compare the library against it.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace chorus::test {

enum class RefKind { sgd, momentum, adam };

struct RefOptimizer {
  RefKind kind = RefKind::sgd;
  double lr = 0.01;
  double momentum = 0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0;
};

// One variable's state and its update.
class RefState {
 public:
  explicit RefState(std::size_t count) : buf_(count), m_(count), v_(count) {}

  void step(const RefOptimizer& o, std::vector<double>& param, const std::vector<double>& grad) {
    ++t_;
    for (std::size_t i = 0; i < param.size(); ++i) {
      const double g = grad[i] + o.weight_decay * param[i];
      switch (o.kind) {
        case RefKind::sgd:
          param[i] = param[i] - o.lr * g;
          break;
        case RefKind::momentum: {
          buf_[i] = t_ == 1 ? g : o.momentum * buf_[i] + g;
          const double direction = o.nesterov ? g + o.momentum * buf_[i] : buf_[i];
          param[i] = param[i] - o.lr * direction;
          break;
        }
        case RefKind::adam: {
          m_[i] = o.beta1 * m_[i] + (1 - o.beta1) * g;
          v_[i] = o.beta2 * v_[i] + (1 - o.beta2) * g * g;
          const double m_hat = m_[i] / (1 - std::pow(o.beta1, double(t_)));
          const double v_hat = v_[i] / (1 - std::pow(o.beta2, double(t_)));
          param[i] = param[i] - o.lr * m_hat / (std::sqrt(v_hat) + o.eps);
          break;
        }
      }
    }
  }

 private:
  long t_ = 0;
  std::vector<double> buf_, m_, v_;
};

}  // namespace chorus::test
