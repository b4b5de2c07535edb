// chorus._core: the C API (include/chorus.h) for Python. Buffers are NumPy
// arrays and torch CPU tensors, used in place (buffers.hpp); blocking calls
// release the GIL; errors are the classes of chorus/errors.py.
#include <pybind11/stl.h>

#include <vector>

#include "buffers.hpp"
#include "core.hpp"

namespace chorus_py {

namespace {

std::vector<py::object>& error_classes() {
  static auto* classes = new std::vector<py::object>();  // lives as long as the process
  return *classes;
}

py::object init_from_env() {
  chorus_comm_t comm = nullptr;
  chorus_result_t result;
  {
    py::gil_scoped_release release;
    result = chorus_init_from_env(&comm);
  }
  if (result != CHORUS_SUCCESS) raise_result(result, nullptr);
  return wrap_comm(comm);
}

py::object init(int rank, int world_size, const std::string& store_addr,
                const std::optional<std::string>& job_token,
                const std::optional<std::string>& transport) {
  chorus_init_config_t config = CHORUS_INIT_CONFIG_INITIALIZER;
  config.rank = rank;
  config.world_size = world_size;
  config.store_addr = store_addr.c_str();
  config.job_token = job_token ? job_token->c_str() : nullptr;
  config.transport = transport ? transport->c_str() : nullptr;
  chorus_comm_t comm = nullptr;
  chorus_result_t result;
  {
    py::gil_scoped_release release;
    result = chorus_init(&config, &comm);
  }
  if (result != CHORUS_SUCCESS) raise_result(result, nullptr);
  return wrap_comm(comm);
}

}  // namespace

void set_error_classes(const py::list& classes) {
  auto& stored = error_classes();
  stored.clear();
  for (auto cls : classes) stored.push_back(py::reinterpret_borrow<py::object>(cls));
}

void raise_message(chorus_result_t result, const std::string& message) {
  const auto& classes = error_classes();
  const auto code = static_cast<std::size_t>(result);
  py::object cls = code < classes.size() && !classes[code].is_none()
                       ? classes[code]
                       : py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
  py::object error = classes.empty() ? cls(message) : cls(message, static_cast<int>(result));
  PyErr_SetObject(cls.ptr(), error.ptr());
  throw py::error_already_set();
}

void raise_result(chorus_result_t result, chorus_comm_t comm) {
  const char* message = chorus_comm_last_error(comm);
  raise_message(result, message && *message ? message : chorus_result_string(result));
}

PYBIND11_MODULE(_core, module) {
  module.doc() = "chorus: collective communication over the C API (include/chorus.h)";
  module.def("_set_error_classes", &set_error_classes);
  module.def("version", &chorus_version, "CHORUS_VERSION of the loaded library");
  module.def(
      "result_string",
      [](int code) {
        return std::string(chorus_result_string(static_cast<chorus_result_t>(code)));
      },
      py::arg("code"));
  module.def("init_from_env", &init_from_env,
             "A communicator of every rank of the job, from CHORUS_* (chorusrun) or the "
             "variables of Open MPI, Slurm, torchrun or TF_CONFIG");
  module.def("init", &init, py::arg("rank"), py::arg("world_size"), py::arg("store_addr"),
             py::arg("job_token") = py::none(), py::arg("transport") = py::none(),
             "A communicator from explicit settings (store_addr 'host:port')");
  const std::pair<const char*, chorus_dtype_t> dtypes[] = {
      {"float32", CHORUS_FLOAT32},   {"float64", CHORUS_FLOAT64}, {"float16", CHORUS_FLOAT16},
      {"bfloat16", CHORUS_BFLOAT16}, {"int8", CHORUS_INT8},       {"uint8", CHORUS_UINT8},
      {"int32", CHORUS_INT32},       {"uint32", CHORUS_UINT32},   {"int64", CHORUS_INT64},
      {"uint64", CHORUS_UINT64}};
  py::dict dtype_numbers;
  for (const auto& [name, dtype] : dtypes) dtype_numbers[name] = static_cast<int>(dtype);
  module.attr("DTYPES") = dtype_numbers;
  module.def(
      "dtype_of",
      [](py::handle buffer) { return static_cast<int>(buffer_of(buffer, "buffer", false).dtype); },
      py::arg("buffer"), "The chorus dtype number of an array or tensor");
  module.attr("TAG_MAX") = CHORUS_TAG_MAX;
  bind_comm(module);
  bind_strategies(module);
}

}  // namespace chorus_py
