// Comm (a communicator) and Request (an operation in flight) of the
// extension module; the collectives over them are in collectives.cpp.
#pragma once

#include <pybind11/pybind11.h>

#include <chorus.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "buffers.hpp"
#include "core.hpp"

namespace chorus_py {

class Comm;

class Request {
 public:
  Request(chorus_request_t request, py::object comm, py::object keep, py::object result)
      : request_(request),
        comm_(std::move(comm)),
        keep_(std::move(keep)),
        result_(std::move(result)) {}
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  // Dropped unfinished: the buffers it holds must outlive the operation.
  ~Request() {
    if (request_) {
      py::gil_scoped_release release;
      chorus_wait(&request_, 0);
    }
  }

  py::object wait(py::handle timeout);
  bool test();
  bool done() const { return request_ == nullptr; }
  // chorus.wait_all: every request at once (chorus_wait_all); their outputs,
  // or the first failure in order raised.
  static py::list wait_all(const py::sequence& requests, py::handle timeout);

 private:
  chorus_comm_t comm_handle() const;
  void finish(chorus_result_t result);
  // finish() without raising: the buffers let go, a failure kept.
  void settle(chorus_result_t result);

  chorus_request_t request_;
  py::object comm_;  // the Comm: its handle names the errors; kept alive with the request
  py::object keep_;  // the buffers
  py::object result_;
  std::optional<chorus_result_t> failed_;
};

// Seconds (None: 0, CHORUS_TIMEOUT) as the C API's timeout_ms.
std::int64_t timeout_ms_of(py::handle timeout);
// b must hold b_multiple times a's elements, of a's dtype.
void same_size(const Buffer& a, const Buffer& b, std::size_t b_multiple, const char* what);

class Comm {
 public:
  explicit Comm(chorus_comm_t handle) : handle_(handle) {}
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  ~Comm() {
    if (handle_) chorus_comm_destroy(handle_);
  }

  chorus_comm_t handle() const {
    if (!handle_) raise_message(CHORUS_ERR_INVALID_USAGE, "the communicator was destroyed");
    return handle_;
  }
  chorus_comm_t handle_or_null() const { return handle_; }
  int rank() const {
    int rank = -1;
    check(chorus_comm_rank(handle(), &rank));
    return rank;
  }
  int size() const {
    int size = 0;
    check(chorus_comm_size(handle(), &size));
    return size;
  }
  std::string last_error() const { return chorus_comm_last_error(handle_); }

  void destroy() {
    chorus_comm_t handle = std::exchange(handle_, nullptr);
    if (!handle) return;
    chorus_result_t result;
    {
      py::gil_scoped_release release;
      result = chorus_comm_destroy(handle);
    }
    if (result != CHORUS_SUCCESS) raise_result(result, nullptr);
  }
  void abort(const std::string& reason) { check(chorus_comm_abort(handle(), reason.c_str())); }
  void fail(int code, const std::string& reason) {
    check(chorus_comm_fail(handle(), static_cast<chorus_result_t>(code), reason.c_str()));
  }

  // Reads the arguments; a refusal fails the communicator and raises InvalidArgument.
  template <class Read>
  void read_arguments(Read&& read) {
    chorus_comm_t comm = handle();
    try {
      read();
    } catch (const ArgumentError& refused) {
      chorus_comm_fail(comm, CHORUS_ERR_INVALID_ARGUMENT, refused.what());
      raise_message(CHORUS_ERR_INVALID_ARGUMENT, refused.what());
    }
  }

  // Runs `call(request)`: blocking (request NULL, GIL released) returning
  // `result`, or non-blocking returning a Request that holds `keep`.
  template <class Call>
  py::object launch(py::object self, bool nonblocking, py::object keep, py::object result,
                    Call&& call) {
    chorus_comm_t comm = handle();
    if (nonblocking) {
      chorus_request_t request = nullptr;
      check(call(&request));
      return py::cast(
          std::make_unique<Request>(request, std::move(self), std::move(keep), std::move(result)));
    }
    chorus_result_t status;
    {
      py::gil_scoped_release release;
      status = call(nullptr);
    }
    if (status != CHORUS_SUCCESS) raise_result(status, comm);
    return result;
  }

  void check(chorus_result_t result) const {
    if (result != CHORUS_SUCCESS) raise_result(result, handle_);
  }

 private:
  chorus_comm_t handle_;
};

// The collectives, point-to-point, fusion and split methods of Comm.
void bind_collectives(py::class_<Comm>& comm);

}  // namespace chorus_py
