#include "buffers.hpp"

#include <pybind11/numpy.h>

#include <string_view>

namespace chorus_py {

namespace {

chorus_dtype_t numpy_dtype(const py::dtype& dtype, const char* what) {
  const char kind = dtype.kind();
  const auto size = static_cast<std::size_t>(dtype.itemsize());
  if (kind == 'f') {
    if (size == 4) return CHORUS_FLOAT32;
    if (size == 8) return CHORUS_FLOAT64;
    if (size == 2) return CHORUS_FLOAT16;
  } else if (kind == 'i') {
    if (size == 1) return CHORUS_INT8;
    if (size == 4) return CHORUS_INT32;
    if (size == 8) return CHORUS_INT64;
  } else if (kind == 'u') {
    if (size == 1) return CHORUS_UINT8;
    if (size == 4) return CHORUS_UINT32;
    if (size == 8) return CHORUS_UINT64;
  } else if (kind == 'V' && size == 2 &&
             py::str(dtype.attr("name")).cast<std::string>() == "bfloat16") {
    return CHORUS_BFLOAT16;  // ml_dtypes' bfloat16
  }
  throw ArgumentError(std::string(what) + ": NumPy dtype " + py::str(dtype).cast<std::string>() +
                      " has no chorus dtype (float16/32/64, bfloat16, int8/32/64, uint8/32/64)");
}

Buffer from_numpy(const py::array& array, const char* what, bool writable) {
  if (!(array.flags() & py::array::c_style))
    throw ArgumentError(std::string(what) +
                        ": the array is not C-contiguous (use numpy.ascontiguousarray)");
  if (writable && !array.writeable())
    throw ArgumentError(std::string(what) + ": the array is read-only and receives the result");
  return {const_cast<void*>(array.data()), static_cast<std::size_t>(array.size()),
          numpy_dtype(array.dtype(), what)};
}

// torch.Tensor and the chorus dtype of each torch dtype, looked up once torch
// has been imported by the program (this module never imports it itself).
struct Torch {
  py::object tensor_type;
  py::dict dtypes;  // torch.dtype -> chorus dtype
};

const Torch* torch_if_loaded() {
  static Torch* torch = nullptr;
  if (torch) return torch;
  PyObject* module = PyImport_GetModule(py::str("torch").ptr());
  if (!module) {
    PyErr_Clear();
    return nullptr;
  }
  auto torch_module = py::reinterpret_steal<py::object>(module);
  auto* loaded =
      new Torch{torch_module.attr("Tensor"), py::dict()};  // lives as long as the process
  const std::pair<const char*, chorus_dtype_t> names[] = {
      {"float32", CHORUS_FLOAT32},   {"float64", CHORUS_FLOAT64}, {"float16", CHORUS_FLOAT16},
      {"bfloat16", CHORUS_BFLOAT16}, {"int8", CHORUS_INT8},       {"uint8", CHORUS_UINT8},
      {"int32", CHORUS_INT32},       {"uint32", CHORUS_UINT32},   {"int64", CHORUS_INT64},
      {"uint64", CHORUS_UINT64}};
  for (const auto& [name, dtype] : names)
    if (py::hasattr(torch_module, name))
      loaded->dtypes[torch_module.attr(name)] = static_cast<int>(dtype);
  torch = loaded;
  return torch;
}

Buffer from_torch(const Torch& torch, py::handle tensor, const char* what) {
  const auto device = py::str(tensor.attr("device").attr("type")).cast<std::string>();
  if (device != "cpu")
    throw ArgumentError(std::string(what) + ": a tensor on device '" + device +
                        "'; the Python package moves CPU tensors");
  if (!tensor.attr("is_contiguous")().cast<bool>())
    throw ArgumentError(std::string(what) + ": the tensor is not contiguous (use .contiguous())");
  py::object dtype = tensor.attr("dtype");
  if (!torch.dtypes.contains(dtype))
    throw ArgumentError(std::string(what) + ": torch dtype " + py::str(dtype).cast<std::string>() +
                        " has no chorus dtype");
  return {reinterpret_cast<void*>(tensor.attr("data_ptr")().cast<std::uintptr_t>()),
          tensor.attr("numel")().cast<std::size_t>(),
          static_cast<chorus_dtype_t>(torch.dtypes[dtype].cast<int>())};
}

}  // namespace

std::size_t dtype_size(chorus_dtype_t dtype) {
  switch (dtype) {
    case CHORUS_FLOAT64:
    case CHORUS_INT64:
    case CHORUS_UINT64:
      return 8;
    case CHORUS_FLOAT32:
    case CHORUS_INT32:
    case CHORUS_UINT32:
      return 4;
    case CHORUS_FLOAT16:
    case CHORUS_BFLOAT16:
      return 2;
    default:
      return 1;
  }
}

std::size_t Buffer::bytes() const {
  return count * dtype_size(dtype);
}

Buffer buffer_of(py::handle object, const char* what, bool writable) {
  if (object.is_none()) throw ArgumentError(std::string(what) + " is None");
  if (py::isinstance<py::array>(object))
    return from_numpy(py::reinterpret_borrow<py::array>(object), what, writable);
  if (const Torch* torch = torch_if_loaded();
      torch && PyObject_IsInstance(object.ptr(), torch->tensor_type.ptr()) == 1)
    return from_torch(*torch, object, what);
  throw ArgumentError(std::string(what) + ": a " +
                      py::str(py::type::handle_of(object).attr("__name__")).cast<std::string>() +
                      " is neither a NumPy array nor a torch tensor");
}

py::object empty_like(py::handle like, const py::tuple& shape) {
  if (py::isinstance<py::array>(like))
    return py::module_::import("numpy").attr("empty")(shape, py::arg("dtype") = like.attr("dtype"));
  return like.attr("new_empty")(shape);
}

py::tuple shape_of(py::handle object) {
  return py::tuple(object.attr("shape"));
}

chorus_dtype_t wire_dtype_of(py::handle object) {
  if (object.is_none()) return CHORUS_WIRE_DTYPE_DEFAULT;
  if (py::isinstance<py::str>(object)) {
    const auto name = object.cast<std::string>();
    if (name == "bfloat16" || name == "bf16") return CHORUS_BFLOAT16;
    if (name == "float16" || name == "f16") return CHORUS_FLOAT16;
    if (name == "float32" || name == "none") return CHORUS_FLOAT32;
    throw ArgumentError("wire_dtype '" + name + "': one of bfloat16, float16, float32 or None");
  }
  return static_cast<chorus_dtype_t>(object.cast<int>());
}

}  // namespace chorus_py
