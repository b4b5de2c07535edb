// The mirrored strategy (include/chorus.h, chorus_mirrored_*) for Python:
// variables and gradients are NumPy arrays or torch tensors registered in
// place; the strategy keeps references to them (the C library keeps their
// addresses) and to its communicator.
#include <pybind11/stl.h>

#include "comm.hpp"

namespace chorus_py {

namespace {

chorus_optimizer_kind_t optimizer_kind(const std::string& name) {
  if (name == "sgd") return CHORUS_OPTIMIZER_SGD;
  if (name == "momentum") return CHORUS_OPTIMIZER_MOMENTUM;
  if (name == "adam") return CHORUS_OPTIMIZER_ADAM;
  raise_message(CHORUS_ERR_INVALID_ARGUMENT,
                "optimizer '" + name + "': one of 'sgd', 'momentum', 'adam'");
}

class Mirrored {
 public:
  Mirrored(py::object comm, int root, bool use_fusion, std::optional<int> check_replicas)
      : comm_(std::move(comm)) {
    Comm& c = comm_.cast<Comm&>();
    chorus_mirrored_options_t options = CHORUS_MIRRORED_OPTIONS_INITIALIZER;
    options.root = root;
    options.use_fusion = use_fusion ? 1 : 0;
    options.check_replicas = check_replicas ? *check_replicas : -1;
    c.check(chorus_mirrored_create(c.handle(), &options, &handle_));
  }
  Mirrored(const Mirrored&) = delete;
  Mirrored& operator=(const Mirrored&) = delete;
  ~Mirrored() {
    if (handle_) chorus_mirrored_destroy(handle_);
  }

  void add_variable(const std::string& name, py::object variable, py::object gradient) {
    Comm& c = comm_.cast<Comm&>();
    Buffer value, grad;
    c.read_arguments([&] {
      value = buffer_of(variable, "variable", true);
      if (!gradient.is_none()) {
        grad = buffer_of(gradient, "gradient", true);
        same_size(value, grad, 1, "add_variable");
      }
    });
    c.check(chorus_mirrored_add_variable(handle(), name.c_str(), value.data,
                                         gradient.is_none() ? nullptr : grad.data, value.count,
                                         value.dtype));
    keep_.append(py::make_tuple(variable, gradient));
  }

  void broadcast_variables(py::handle timeout) {
    run_timed(timeout,
              [this](std::int64_t ms) { return chorus_mirrored_broadcast_variables(handle_, ms); });
  }
  void gradient_ready(const std::string& name) {
    comm().check(chorus_mirrored_gradient_ready(handle(), name.c_str()));
  }
  void reduce_gradients(py::handle timeout) {
    run_timed(timeout,
              [this](std::int64_t ms) { return chorus_mirrored_reduce_gradients(handle_, ms); });
  }
  void apply(const std::string& kind, double learning_rate, double momentum, bool nesterov,
             std::pair<double, double> betas, double epsilon, double weight_decay) {
    chorus_optimizer_options_t optimizer = CHORUS_OPTIMIZER_OPTIONS_INITIALIZER;
    optimizer.kind = optimizer_kind(kind);
    optimizer.learning_rate = learning_rate;
    optimizer.momentum = momentum;
    optimizer.nesterov = nesterov ? 1 : 0;
    optimizer.beta1 = betas.first;
    optimizer.beta2 = betas.second;
    optimizer.epsilon = epsilon;
    optimizer.weight_decay = weight_decay;
    chorus_mirrored_t m = handle();
    chorus_result_t result;
    {
      py::gil_scoped_release release;
      result = chorus_mirrored_apply(m, &optimizer);
    }
    comm().check(result);
  }
  void end_step(py::handle timeout) {
    run_timed(timeout, [this](std::int64_t ms) { return chorus_mirrored_end_step(handle_, ms); });
  }
  void check_replicas(py::handle timeout) {
    run_timed(timeout,
              [this](std::int64_t ms) { return chorus_mirrored_check_replicas(handle_, ms); });
  }
  void destroy() {
    if (chorus_mirrored_t m = std::exchange(handle_, nullptr)) {
      chorus_result_t result;
      {
        py::gil_scoped_release release;
        result = chorus_mirrored_destroy(m);
      }
      keep_ = py::list();
      comm().check(result);
    }
  }

 private:
  Comm& comm() const { return comm_.cast<Comm&>(); }
  chorus_mirrored_t handle() const {
    if (!handle_) raise_message(CHORUS_ERR_INVALID_USAGE, "the strategy was destroyed");
    return handle_;
  }
  template <class Call>
  void run_timed(py::handle timeout, Call&& call) {
    std::int64_t ms = 0;
    try {
      ms = timeout_ms_of(timeout);
    } catch (const ArgumentError& refused) {
      raise_message(CHORUS_ERR_INVALID_ARGUMENT, refused.what());
    }
    handle();
    chorus_result_t result;
    {
      py::gil_scoped_release release;
      result = call(ms);
    }
    comm().check(result);
  }

  py::object comm_;
  chorus_mirrored_t handle_ = nullptr;
  py::list keep_;  // (variable, gradient) of every registration
};

}  // namespace

void bind_strategies(py::module_& module) {
  const auto timeout = py::arg("timeout") = py::none();
  py::class_<Mirrored>(module, "Mirrored",
                       "Synchronous data parallelism (chorus_mirrored_*): replicas of every "
                       "variable, gradients averaged over the ranks, the same update everywhere")
      .def(py::init<py::object, int, bool, std::optional<int>>(), py::arg("comm"),
           py::arg("root") = 0, py::arg("use_fusion") = true,
           py::arg("check_replicas") = py::none(), py::keep_alive<1, 2>())
      .def("add_variable", &Mirrored::add_variable, py::arg("name"), py::arg("variable"),
           py::arg("gradient") = py::none())
      .def("broadcast_variables", &Mirrored::broadcast_variables, timeout)
      .def("gradient_ready", &Mirrored::gradient_ready, py::arg("name"))
      .def("reduce_gradients", &Mirrored::reduce_gradients, timeout)
      .def("apply", &Mirrored::apply, py::arg("optimizer") = "sgd", py::arg("lr") = 0.01,
           py::arg("momentum") = 0.0, py::arg("nesterov") = false,
           py::arg("betas") = std::make_pair(0.9, 0.999), py::arg("eps") = 1e-8,
           py::arg("weight_decay") = 0.0)
      .def("end_step", &Mirrored::end_step, timeout)
      .def("check_replicas", &Mirrored::check_replicas, timeout)
      .def("destroy", &Mirrored::destroy);
}

}  // namespace chorus_py
