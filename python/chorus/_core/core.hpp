// The extension module's shared pieces: errors raised as the Python classes
// of chorus/errors.py, and the Comm and Request classes (comm.cpp).
#pragma once

#include <pybind11/pybind11.h>

#include <chorus.h>

#include <string>

namespace chorus_py {

namespace py = pybind11;

// Set once by chorus/__init__.py: the exception class of each result code.
void set_error_classes(const py::list& classes);

// Raises the class of `result` with the message of the failed call on `comm`
// (this thread's chorus_comm_last_error; comm may be NULL).
[[noreturn]] void raise_result(chorus_result_t result, chorus_comm_t comm);
[[noreturn]] void raise_message(chorus_result_t result, const std::string& message);

// Comm (a communicator) and Request; `wrap_comm` owns a new handle.
void bind_comm(py::module_& module);
py::object wrap_comm(chorus_comm_t handle);
// The strategies (strategy.cpp).
void bind_strategies(py::module_& module);

}  // namespace chorus_py
