// Comm and Request: a communicator handle owned by Python (destroyed with
// it, or by destroy()), and requests that keep their buffers alive until
// they complete.
#include "comm.hpp"

#include <cmath>
#include <vector>

namespace chorus_py {

std::int64_t timeout_ms_of(py::handle timeout) {
  if (timeout.is_none()) return 0;
  const double seconds = timeout.cast<double>();
  if (!(seconds > 0) || !std::isfinite(seconds))
    throw ArgumentError("timeout must be a positive number of seconds or None (CHORUS_TIMEOUT)");
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(seconds * 1000)));
}

void same_size(const Buffer& a, const Buffer& b, std::size_t b_multiple, const char* what) {
  if (a.dtype != b.dtype)
    throw ArgumentError(std::string(what) + ": input and output dtypes differ (" +
                        std::to_string(a.dtype) + " vs " + std::to_string(b.dtype) + ")");
  if (a.count * b_multiple != b.count)
    throw ArgumentError(std::string(what) + ": the output holds " + std::to_string(b.count) +
                        " elements, the call needs " + std::to_string(a.count * b_multiple));
}

chorus_comm_t Request::comm_handle() const {
  return comm_.cast<const Comm&>().handle_or_null();
}

void Request::settle(chorus_result_t result) {
  keep_ = py::none();
  if (result != CHORUS_SUCCESS) failed_ = result;
}

void Request::finish(chorus_result_t result) {
  settle(result);
  if (result != CHORUS_SUCCESS) raise_result(result, comm_handle());
}

py::list Request::wait_all(const py::sequence& requests, py::handle timeout) {
  std::vector<Request*> all;
  for (py::handle item : requests) all.push_back(&item.cast<Request&>());
  std::int64_t timeout_ms = 0;
  try {
    timeout_ms = timeout_ms_of(timeout);
  } catch (const ArgumentError& refused) {
    raise_message(CHORUS_ERR_INVALID_ARGUMENT, refused.what());
  }
  for (Request* r : all)
    if (r->failed_) raise_message(*r->failed_, "the request already failed");
  std::vector<chorus_request_t> handles;
  for (Request* r : all) handles.push_back(r->request_);
  std::vector<chorus_result_t> results(all.size(), CHORUS_SUCCESS);
  chorus_result_t first;
  {
    py::gil_scoped_release release;
    first = chorus_wait_all(handles.size(), handles.data(), timeout_ms, results.data());
  }
  // Every request that finished lets its buffers go; one still pending (its
  // wait timed out) keeps them.
  for (std::size_t i = 0; i < all.size(); ++i) {
    const bool finished = all[i]->request_ && !handles[i];
    all[i]->request_ = handles[i];
    if (finished) all[i]->settle(results[i]);
  }
  if (first != CHORUS_SUCCESS) {
    for (std::size_t i = 0; i < all.size(); ++i)
      if (results[i] != CHORUS_SUCCESS) raise_result(results[i], all[i]->comm_handle());
    raise_result(first, nullptr);  // refused arguments (a request listed twice)
  }
  py::list outputs;
  for (Request* r : all) outputs.append(r->result_);
  return outputs;
}

py::object Request::wait(py::handle timeout) {
  if (failed_) raise_message(*failed_, "the request already failed");
  if (!request_) return result_;
  std::int64_t timeout_ms = 0;
  try {
    timeout_ms = timeout_ms_of(timeout);
  } catch (const ArgumentError& refused) {
    raise_message(CHORUS_ERR_INVALID_ARGUMENT, refused.what());
  }
  chorus_result_t result;
  {
    py::gil_scoped_release release;
    result = chorus_wait(&request_, timeout_ms);
  }
  if (result == CHORUS_ERR_TIMEOUT && request_)
    raise_result(result, comm_handle());  // still pending
  finish(result);
  return result_;
}

bool Request::test() {
  if (failed_) raise_message(*failed_, "the request already failed");
  if (!request_) return true;
  int done = 0;
  const chorus_result_t result = chorus_test(&request_, &done);
  if (!done) {
    if (result != CHORUS_SUCCESS) raise_result(result, comm_handle());
    return false;
  }
  finish(result);
  return true;
}

py::object wrap_comm(chorus_comm_t handle) {
  return py::cast(std::make_unique<Comm>(handle));
}

void bind_comm(py::module_& module) {
  py::class_<Request>(module, "Request", "An operation in flight: wait() returns its output")
      .def("wait", &Request::wait, py::arg("timeout") = py::none(),
           "Waits for the operation (timeout in seconds; None: CHORUS_TIMEOUT) and returns its "
           "output")
      .def("test", &Request::test, "True once complete (raises if it failed)")
      .def_property_readonly("done", &Request::done);
  module.def("wait_all", &Request::wait_all, py::arg("requests"), py::arg("timeout") = py::none(),
             "Waits for every request at once (chorus_wait_all: with a timeout in seconds, one "
             "deadline for all; None: each its CHORUS_TIMEOUT) and returns their outputs in "
             "order; raises the first failure, in order (the requests that finished are done "
             "either way, one that timed out stays pending)");

  py::class_<Comm> comm(module, "Comm",
                        "A communicator: the ranks of a job, or a group split from it");
  comm.def_property_readonly("rank", &Comm::rank)
      .def_property_readonly("size", &Comm::size)
      .def_property_readonly("last_error", &Comm::last_error)
      .def("destroy", &Comm::destroy,
           "Collective: finishes outstanding work and frees the communicator")
      .def("abort", &Comm::abort, py::arg("reason") = "aborted from Python")
      .def("fail", &Comm::fail, py::arg("code"), py::arg("reason"));
  bind_collectives(comm);
}

}  // namespace chorus_py
