// What a Python object passed as a buffer is to the C API: address, element
// count and dtype, read without copying from a NumPy array or a torch CPU
// tensor (through its attributes: this module does not link against torch).
#pragma once

#include <pybind11/pybind11.h>

#include <chorus.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace chorus_py {

namespace py = pybind11;

// A buffer this module refuses (not contiguous, read-only output, unknown
// dtype, another device); the caller fails the communicator with it so that
// the peers waiting in the same call learn of it too.
class ArgumentError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct Buffer {
  void* data = nullptr;
  std::size_t count = 0;  // elements
  chorus_dtype_t dtype = CHORUS_FLOAT32;
  std::size_t bytes() const;
};

// `what` names the argument in messages ("sendbuf"); `writable`: an output.
Buffer buffer_of(py::handle object, const char* what, bool writable);

// A new array or tensor of `like`'s kind and dtype with the given shape.
py::object empty_like(py::handle like, const py::tuple& shape);

// `object`'s shape as a tuple (NumPy's .shape, torch's .shape).
py::tuple shape_of(py::handle object);

std::size_t dtype_size(chorus_dtype_t dtype);

// "bfloat16", "float16", "float32" (or a chorus dtype number), None: the
// default (CHORUS_WIRE_DTYPE).
chorus_dtype_t wire_dtype_of(py::handle object);

}  // namespace chorus_py
