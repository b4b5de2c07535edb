// The mirrored strategy's C++ form (header-only over chorus.h's
// chorus_mirrored_*; see there for what each call does).
//
//   chorus::Mirrored mirrored(comm);
//   mirrored.add_variable("fc1.weight", std::span<float>(w), std::span<float>(dw));
//   mirrored.broadcast_variables();
//   per step: mirrored.gradient_ready("fc1.weight"); ...
//             mirrored.reduce_gradients();
//             mirrored.apply(chorus::Optimizer::adam(1e-3));
//             mirrored.end_step();
//
// Errors throw chorus::Error with the result code and
// chorus_comm_last_error's message.
#pragma once

#include <chorus.h>
#include <chorus/chorus.hpp>
#include <chorus/error.hpp>

#include <chrono>
#include <span>
#include <string>
#include <utility>

namespace chorus {

struct Optimizer {
  enum class Kind {
    sgd = CHORUS_OPTIMIZER_SGD,
    momentum = CHORUS_OPTIMIZER_MOMENTUM,
    adam = CHORUS_OPTIMIZER_ADAM
  };
  Kind kind = Kind::sgd;
  double learning_rate = 0.01;
  double momentum = 0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  double weight_decay = 0;

  static Optimizer sgd(double learning_rate) {
    Optimizer o;
    o.learning_rate = learning_rate;
    return o;
  }
  static Optimizer momentum_sgd(double learning_rate, double momentum, bool nesterov = false) {
    Optimizer o;
    o.kind = Kind::momentum;
    o.learning_rate = learning_rate;
    o.momentum = momentum;
    o.nesterov = nesterov;
    return o;
  }
  static Optimizer adam(double learning_rate, double beta1 = 0.9, double beta2 = 0.999,
                        double epsilon = 1e-8) {
    Optimizer o;
    o.kind = Kind::adam;
    o.learning_rate = learning_rate;
    o.beta1 = beta1;
    o.beta2 = beta2;
    o.epsilon = epsilon;
    return o;
  }
  chorus_optimizer_options_t c() const {
    chorus_optimizer_options_t o = CHORUS_OPTIMIZER_OPTIONS_INITIALIZER;
    o.kind = static_cast<chorus_optimizer_kind_t>(kind);
    o.learning_rate = learning_rate;
    o.momentum = momentum;
    o.nesterov = nesterov ? 1 : 0;
    o.beta1 = beta1;
    o.beta2 = beta2;
    o.epsilon = epsilon;
    o.weight_decay = weight_decay;
    return o;
  }
};

class Mirrored {
 public:
  struct Options {
    int root = 0;
    bool use_fusion = true;
    int check_replicas = -1;  // -1: CHORUS_CHECK_REPLICAS
  };

  // comm must outlive the strategy.
  explicit Mirrored(Communicator& comm) : Mirrored(comm, Options{}) {}
  Mirrored(Communicator& comm, const Options& options) : comm_(comm.handle()) {
    chorus_mirrored_options_t o = CHORUS_MIRRORED_OPTIONS_INITIALIZER;
    o.root = options.root;
    o.use_fusion = options.use_fusion ? 1 : 0;
    o.check_replicas = options.check_replicas;
    detail::check(chorus_mirrored_create(comm_, &o, &m_), comm_);
  }
  Mirrored(const Mirrored&) = delete;
  Mirrored& operator=(const Mirrored&) = delete;
  ~Mirrored() { chorus_mirrored_destroy(m_); }

  // A trained variable and its gradient (the same size); both must outlive
  // the strategy.
  template <typename T>
  void add_variable(const std::string& name, std::span<T> variable, std::span<T> gradient) {
    if (variable.size() != gradient.size())
      throw Error(CHORUS_ERR_INVALID_ARGUMENT,
                  "Mirrored::add_variable: the variable and its gradient differ in size");
    detail::check(chorus_mirrored_add_variable(m_, name.c_str(), variable.data(), gradient.data(),
                                               variable.size(), dtype_of<T>()),
                  comm_);
  }
  // A variable that is mirrored (broadcast, checked) but not trained.
  template <typename T>
  void add_variable(const std::string& name, std::span<T> variable) {
    detail::check(chorus_mirrored_add_variable(m_, name.c_str(), variable.data(), nullptr,
                                               variable.size(), dtype_of<T>()),
                  comm_);
  }
  void broadcast_variables(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    detail::check(chorus_mirrored_broadcast_variables(m_, detail::to_ms(timeout)), comm_);
  }
  void gradient_ready(const std::string& name) {
    detail::check(chorus_mirrored_gradient_ready(m_, name.c_str()), comm_);
  }
  void reduce_gradients(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    detail::check(chorus_mirrored_reduce_gradients(m_, detail::to_ms(timeout)), comm_);
  }
  void apply(const Optimizer& optimizer) {
    const chorus_optimizer_options_t o = optimizer.c();
    detail::check(chorus_mirrored_apply(m_, &o), comm_);
  }
  void end_step(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    detail::check(chorus_mirrored_end_step(m_, detail::to_ms(timeout)), comm_);
  }
  void check_replicas(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    detail::check(chorus_mirrored_check_replicas(m_, detail::to_ms(timeout)), comm_);
  }
  chorus_mirrored_t handle() const { return m_; }

 private:
  chorus_comm_t comm_;
  chorus_mirrored_t m_ = nullptr;
};

}  // namespace chorus
