// The strategies (include/chorus.h: chorus_mirrored_*, chorus_ps_*) for
// Python: variables and gradients are NumPy arrays or torch tensors
// registered in place; a strategy keeps references to them (the C library
// keeps their addresses) and to its communicator.
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

chorus_optimizer_options_t optimizer_of(const std::string& kind, double learning_rate,
                                        double momentum, bool nesterov,
                                        std::pair<double, double> betas, double epsilon,
                                        double weight_decay) {
  chorus_optimizer_options_t optimizer = CHORUS_OPTIMIZER_OPTIONS_INITIALIZER;
  optimizer.kind = optimizer_kind(kind);
  optimizer.learning_rate = learning_rate;
  optimizer.momentum = momentum;
  optimizer.nesterov = nesterov ? 1 : 0;
  optimizer.beta1 = betas.first;
  optimizer.beta2 = betas.second;
  optimizer.epsilon = epsilon;
  optimizer.weight_decay = weight_decay;
  return optimizer;
}

// What the strategies' classes share: the communicator they hold, a handle
// that destroy() clears, and calls made without the GIL.
template <typename Handle>
class Strategy {
 protected:
  explicit Strategy(py::object comm) : comm_(std::move(comm)) {}
  Comm& comm() const { return comm_.cast<Comm&>(); }
  Handle handle() const {
    if (!handle_) raise_message(CHORUS_ERR_INVALID_USAGE, "the strategy was destroyed");
    return handle_;
  }
  template <class Call>
  void released(Call&& call) {
    Handle h = handle();
    chorus_result_t result;
    {
      py::gil_scoped_release release;
      result = call(h);
    }
    comm().check(result);
  }
  template <class Call>
  void run_timed(py::handle timeout, Call&& call) {
    std::int64_t ms = 0;
    try {
      ms = timeout_ms_of(timeout);
    } catch (const ArgumentError& refused) {
      raise_message(CHORUS_ERR_INVALID_ARGUMENT, refused.what());
    }
    released([&](Handle h) { return call(h, ms); });
  }
  // The NumPy arrays / tensors of a registration, as the C library expects
  // them (gradient None: no gradient).
  std::pair<Buffer, Buffer> buffers(py::object variable, py::object gradient) {
    Buffer value, grad;
    comm().read_arguments([&] {
      value = buffer_of(variable, "variable", true);
      if (!gradient.is_none()) {
        grad = buffer_of(gradient, "gradient", true);
        same_size(value, grad, 1, "add_variable");
      }
    });
    keep_.append(py::make_tuple(variable, gradient));
    return {value, grad};
  }
  template <class Destroy>
  void destroy_with(Destroy&& destroy) {
    if (Handle h = std::exchange(handle_, nullptr)) {
      chorus_result_t result;
      {
        py::gil_scoped_release release;
        result = destroy(h);
      }
      keep_ = py::list();
      comm().check(result);
    }
  }

  py::object comm_;
  Handle handle_ = nullptr;
  py::list keep_;  // (variable, gradient) of every registration
};

class Mirrored : Strategy<chorus_mirrored_t> {
 public:
  Mirrored(py::object comm, int root, bool use_fusion, std::optional<int> check_replicas)
      : Strategy(std::move(comm)) {
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
    auto [value, grad] = buffers(variable, gradient);
    comm().check(chorus_mirrored_add_variable(handle(), name.c_str(), value.data,
                                              gradient.is_none() ? nullptr : grad.data, value.count,
                                              value.dtype));
  }
  void broadcast_variables(py::handle timeout) {
    run_timed(timeout, chorus_mirrored_broadcast_variables);
  }
  void gradient_ready(const std::string& name) {
    comm().check(chorus_mirrored_gradient_ready(handle(), name.c_str()));
  }
  void reduce_gradients(py::handle timeout) {
    run_timed(timeout, chorus_mirrored_reduce_gradients);
  }
  void apply(const std::string& kind, double learning_rate, double momentum, bool nesterov,
             std::pair<double, double> betas, double epsilon, double weight_decay) {
    const chorus_optimizer_options_t optimizer =
        optimizer_of(kind, learning_rate, momentum, nesterov, betas, epsilon, weight_decay);
    released([&](chorus_mirrored_t m) { return chorus_mirrored_apply(m, &optimizer); });
  }
  void end_step(py::handle timeout) { run_timed(timeout, chorus_mirrored_end_step); }
  void check_replicas(py::handle timeout) { run_timed(timeout, chorus_mirrored_check_replicas); }
  void destroy() { destroy_with(chorus_mirrored_destroy); }
};

chorus_ps_mode_t ps_mode(const std::string& name) {
  if (name == "async") return CHORUS_PS_ASYNC;
  if (name == "sync") return CHORUS_PS_SYNC;
  if (name == "bounded") return CHORUS_PS_BOUNDED;
  raise_message(CHORUS_ERR_INVALID_ARGUMENT,
                "mode '" + name + "': one of 'async', 'sync', 'bounded'");
}

class ParameterServer : Strategy<chorus_ps_t> {
 public:
  ParameterServer(py::object communicator, int servers, const std::string& mode, int max_staleness)
      : Strategy(std::move(communicator)) {
    chorus_ps_options_t options = CHORUS_PS_OPTIONS_INITIALIZER;
    options.servers = servers;
    options.mode = ps_mode(mode);
    options.max_staleness = max_staleness;
    Comm& c = comm();
    chorus_comm_t h = c.handle();
    chorus_result_t result;
    {
      py::gil_scoped_release release;
      result = chorus_ps_create(h, &options, &handle_);
    }
    c.check(result);
    chorus_ps_role_t role;
    comm().check(chorus_ps_role(handle_, &role, &index_));
    role_ = role == CHORUS_PS_CHIEF ? "chief" : role == CHORUS_PS_WORKER ? "worker" : "ps";
  }
  ParameterServer(const ParameterServer&) = delete;
  ParameterServer& operator=(const ParameterServer&) = delete;
  ~ParameterServer() {
    if (handle_) chorus_ps_destroy(handle_);
  }

  const std::string& role() const { return role_; }
  int index() const { return index_; }
  // On a server only the variable's size and dtype count: it keeps its own copy.
  void add_variable(const std::string& name, py::object variable, py::object gradient) {
    auto [value, grad] = buffers(variable, gradient);
    const bool server = role_ == "ps";
    comm().check(chorus_ps_add_variable(handle(), name.c_str(), server ? nullptr : value.data,
                                        server || gradient.is_none() ? nullptr : grad.data,
                                        value.count, value.dtype));
  }
  void start(py::handle timeout) { run_timed(timeout, chorus_ps_start); }
  void pull(py::handle timeout) { run_timed(timeout, chorus_ps_pull); }
  void push(py::handle timeout) { run_timed(timeout, chorus_ps_push); }
  void finish(py::handle timeout) { run_timed(timeout, chorus_ps_finish); }
  void serve(const std::string& kind, double learning_rate, double momentum, bool nesterov,
             std::pair<double, double> betas, double epsilon, double weight_decay) {
    const chorus_optimizer_options_t optimizer =
        optimizer_of(kind, learning_rate, momentum, nesterov, betas, epsilon, weight_decay);
    released([&](chorus_ps_t ps) { return chorus_ps_serve(ps, &optimizer); });
  }
  std::vector<int> failed_workers() {
    int ranks[64], count = 0;
    comm().check(chorus_ps_failed_workers(handle(), ranks, 64, &count));
    return std::vector<int>(ranks, ranks + std::min(count, 64));
  }
  void save(const std::string& path, py::handle timeout) {
    run_timed(timeout, [&](chorus_ps_t ps, std::int64_t ms) {
      return chorus_ps_save(ps, path.c_str(), ms);
    });
  }
  void restore(const std::string& path, py::handle timeout) {
    run_timed(timeout, [&](chorus_ps_t ps, std::int64_t ms) {
      return chorus_ps_restore(ps, path.c_str(), ms);
    });
  }
  void destroy() { destroy_with(chorus_ps_destroy); }

 private:
  std::string role_;
  int index_ = -1;
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
  py::class_<ParameterServer>(
      module, "ParameterServer",
      "Asynchronous data parallelism through parameter servers (chorus_ps_*): the last "
      "`servers` ranks (0: TF_CONFIG's ps tasks, as chorusrun --ps K writes them) serve the "
      "variables, rank 0 is the chief, the others workers")
      .def(py::init<py::object, int, const std::string&, int>(), py::arg("comm"),
           py::arg("servers") = 0, py::arg("mode") = "async", py::arg("max_staleness") = 0,
           py::keep_alive<1, 2>())
      .def_property_readonly("role", &ParameterServer::role)
      .def_property_readonly("index", &ParameterServer::index)
      .def("add_variable", &ParameterServer::add_variable, py::arg("name"), py::arg("variable"),
           py::arg("gradient") = py::none())
      .def("start", &ParameterServer::start, timeout)
      .def("pull", &ParameterServer::pull, timeout)
      .def("push", &ParameterServer::push, timeout)
      .def("finish", &ParameterServer::finish, timeout)
      .def("serve", &ParameterServer::serve, py::arg("optimizer") = "sgd", py::arg("lr") = 0.01,
           py::arg("momentum") = 0.0, py::arg("nesterov") = false,
           py::arg("betas") = std::make_pair(0.9, 0.999), py::arg("eps") = 1e-8,
           py::arg("weight_decay") = 0.0)
      .def("failed_workers", &ParameterServer::failed_workers)
      .def("save", &ParameterServer::save, py::arg("path"), timeout)
      .def("restore", &ParameterServer::restore, py::arg("path"), timeout)
      .def("destroy", &ParameterServer::destroy);
}

}  // namespace chorus_py
