// chorus.torch._backend: the creator torch.distributed calls for each process
// group of backend "chorus" (registered by chorus/torch/__init__.py).
#include <pybind11/chrono.h>
#include <torch/python.h>

#include "backend.hpp"

PYBIND11_MODULE(_backend, m) {
  m.doc() = "Chorus as a torch.distributed backend (see chorus.torch)";
  // (store, rank, world_size, timeout): the signature of a non-extended
  // Backend.register_backend creator. Joining the group blocks on the store:
  // without the GIL, so that Python threads (and a store served from Python) go on.
  m.def("create_backend", &chorus::torch_backend::ChorusBackend::create, pybind11::arg("store"),
        pybind11::arg("rank"), pybind11::arg("world_size"), pybind11::arg("timeout"),
        pybind11::call_guard<pybind11::gil_scoped_release>());
}
