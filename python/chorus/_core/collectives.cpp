// Comm and Request. Every collective is one method with a `nonblocking` flag:
// the arguments are read and checked once, then either the blocking C call
// runs with the GIL released or the non-blocking one returns a Request that
// keeps the buffers alive until it completes (chorus/__init__.py adds the
// i-forms). An argument this module refuses fails the communicator
// (chorus_comm_fail), as the C API does with the arguments it refuses, so
// that peers already waiting in the call fail too instead of timing out.
#include <pybind11/stl.h>

#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "comm.hpp"

namespace chorus_py {

namespace {

using Self = py::object;
using Obj = py::object;

// Shapes of the outputs this module allocates when none is given.
py::tuple prepend(std::size_t first, const py::tuple& shape) {
  py::list dims;
  dims.append(first);
  for (auto dim : shape) dims.append(dim);
  return py::tuple(dims);
}
// One of `parts` blocks along the first dimension: (parts, ...) gives (...).
py::tuple drop_first(const py::tuple& shape, std::size_t parts, std::size_t count) {
  if (shape.size() >= 1 && shape[0].cast<std::size_t>() % parts == 0) {
    py::list dims;
    if (shape[0].cast<std::size_t>() != parts || shape.size() == 1)
      dims.append(shape[0].cast<std::size_t>() / parts);
    for (std::size_t i = 1; i < shape.size(); ++i) dims.append(shape[i]);
    return py::tuple(dims);
  }
  return py::make_tuple(count / parts);
}

Obj allreduce(Self self, Obj tensor, Obj out, int op, Obj timeout, Obj wire, bool nonblocking) {
  Comm& c = self.cast<Comm&>();
  Buffer in, result;
  chorus_allreduce_options_t options = CHORUS_ALLREDUCE_OPTIONS_INITIALIZER;
  std::int64_t ms = 0;
  c.read_arguments([&] {
    in = buffer_of(tensor, "tensor", out.is_none());
    result = out.is_none() ? in : buffer_of(out, "out", true);
    same_size(in, result, 1, "allreduce");
    options.wire_dtype = wire_dtype_of(wire);
    ms = timeout_ms_of(timeout);
  });
  chorus_comm_t h = c.handle();
  auto dtype = in.dtype;
  auto reduce = static_cast<chorus_op_t>(op);
  return c.launch(self, nonblocking, py::make_tuple(tensor, out), out.is_none() ? tensor : out,
                  [&](chorus_request_t* request) {
                    return request ? chorus_iallreduce_ex(h, in.data, result.data, in.count, dtype,
                                                          reduce, &options, request)
                                   : chorus_allreduce_ex(h, in.data, result.data, in.count, dtype,
                                                         reduce, &options, ms);
                  });
}

// `what`'s input must split into `size` equal blocks.
void require_blocks(const Buffer& in, std::size_t size, const char* what) {
  if (in.count % size != 0)
    throw ArgumentError(std::string(what) + ": the input's " + std::to_string(in.count) +
                        " elements do not split into " + std::to_string(size) + " equal blocks");
}

// The arguments of a call on one buffer (broadcast, send, recv).
struct OneBuffer {
  Buffer buffer;
  std::int64_t timeout_ms = 0;
};
OneBuffer read_one(Comm& c, Obj tensor, bool writable, Obj timeout) {
  OneBuffer read;
  c.read_arguments([&] {
    read.buffer = buffer_of(tensor, "tensor", writable);
    read.timeout_ms = timeout_ms_of(timeout);
  });
  return read;
}

Obj broadcast(Self self, Obj tensor, int root, Obj timeout, bool nonblocking) {
  Comm& c = self.cast<Comm&>();
  const OneBuffer one = read_one(c, tensor, true, timeout);
  const Buffer& buffer = one.buffer;
  const std::int64_t ms = one.timeout_ms;
  chorus_comm_t h = c.handle();
  return c.launch(self, nonblocking, tensor, tensor, [&](chorus_request_t* request) {
    return request ? chorus_ibroadcast(h, buffer.data, buffer.count, buffer.dtype, root, request)
                   : chorus_broadcast(h, buffer.data, buffer.count, buffer.dtype, root, ms);
  });
}

Obj allgather(Self self, Obj tensor, Obj out, Obj timeout, bool nonblocking) {
  Comm& c = self.cast<Comm&>();
  const auto size = static_cast<std::size_t>(c.size());
  Buffer in, result;
  std::int64_t ms = 0;
  c.read_arguments([&] {
    in = buffer_of(tensor, "tensor", false);
    if (out.is_none()) out = empty_like(tensor, prepend(size, shape_of(tensor)));
    result = buffer_of(out, "out", true);
    same_size(in, result, size, "allgather");
    ms = timeout_ms_of(timeout);
  });
  chorus_comm_t h = c.handle();
  return c.launch(
      self, nonblocking, py::make_tuple(tensor, out), out, [&](chorus_request_t* request) {
        return request ? chorus_iallgather(h, in.data, result.data, in.count, in.dtype, request)
                       : chorus_allgather(h, in.data, result.data, in.count, in.dtype, ms);
      });
}

Obj reduce_scatter(Self self, Obj tensor, Obj out, int op, Obj timeout, bool nonblocking) {
  Comm& c = self.cast<Comm&>();
  const auto size = static_cast<std::size_t>(c.size());
  Buffer in, result;
  std::int64_t ms = 0;
  c.read_arguments([&] {
    in = buffer_of(tensor, "tensor", false);
    require_blocks(in, size, "reduce_scatter");
    if (out.is_none()) out = empty_like(tensor, drop_first(shape_of(tensor), size, in.count));
    result = buffer_of(out, "out", true);
    same_size(result, in, size, "reduce_scatter");
    ms = timeout_ms_of(timeout);
  });
  chorus_comm_t h = c.handle();
  auto reduce = static_cast<chorus_op_t>(op);
  return c.launch(self, nonblocking, py::make_tuple(tensor, out), out,
                  [&](chorus_request_t* request) {
                    return request ? chorus_ireduce_scatter(h, in.data, result.data, result.count,
                                                            in.dtype, reduce, request)
                                   : chorus_reduce_scatter(h, in.data, result.data, result.count,
                                                           in.dtype, reduce, ms);
                  });
}

Obj reduce(Self self, Obj tensor, Obj out, int op, int root, Obj timeout, bool nonblocking) {
  Comm& c = self.cast<Comm&>();
  const bool at_root = c.rank() == root;
  Buffer in, result;
  std::int64_t ms = 0;
  c.read_arguments([&] {
    in = buffer_of(tensor, "tensor", at_root && out.is_none());
    if (at_root) {
      result = out.is_none() ? in : buffer_of(out, "out", true);
      same_size(in, result, 1, "reduce");
    }
    ms = timeout_ms_of(timeout);
  });
  chorus_comm_t h = c.handle();
  auto reduce = static_cast<chorus_op_t>(op);
  Obj returned = at_root ? (out.is_none() ? tensor : out) : py::none();
  return c.launch(
      self, nonblocking, py::make_tuple(tensor, out), returned, [&](chorus_request_t* request) {
        return request
                   ? chorus_ireduce(h, in.data, result.data, in.count, in.dtype, reduce, root,
                                    request)
                   : chorus_reduce(h, in.data, result.data, in.count, in.dtype, reduce, root, ms);
      });
}

Obj gather(Self self, Obj tensor, Obj out, int root, Obj timeout, bool nonblocking) {
  Comm& c = self.cast<Comm&>();
  const auto size = static_cast<std::size_t>(c.size());
  const bool at_root = c.rank() == root;
  Buffer in, result;
  std::int64_t ms = 0;
  c.read_arguments([&] {
    in = buffer_of(tensor, "tensor", false);
    if (at_root) {
      if (out.is_none()) out = empty_like(tensor, prepend(size, shape_of(tensor)));
      result = buffer_of(out, "out", true);
      same_size(in, result, size, "gather");
    }
    ms = timeout_ms_of(timeout);
  });
  chorus_comm_t h = c.handle();
  return c.launch(
      self, nonblocking, py::make_tuple(tensor, out), at_root ? out : py::none(),
      [&](chorus_request_t* request) {
        return request ? chorus_igather(h, in.data, result.data, in.count, in.dtype, root, request)
                       : chorus_gather(h, in.data, result.data, in.count, in.dtype, root, ms);
      });
}

Obj scatter(Self self, Obj tensor, Obj out, int root, Obj timeout, bool nonblocking) {
  Comm& c = self.cast<Comm&>();
  const auto size = static_cast<std::size_t>(c.size());
  const bool at_root = c.rank() == root;
  Buffer in, result;
  std::int64_t ms = 0;
  c.read_arguments([&] {
    if (at_root) {
      in = buffer_of(tensor, "tensor", false);
      require_blocks(in, size, "scatter");
      if (out.is_none()) out = empty_like(tensor, drop_first(shape_of(tensor), size, in.count));
    } else if (out.is_none()) {
      throw ArgumentError(
          "scatter: ranks other than the root pass `out` (it says how much they receive)");
    }
    result = buffer_of(out, "out", true);
    if (at_root) same_size(result, in, size, "scatter");
    ms = timeout_ms_of(timeout);
  });
  chorus_comm_t h = c.handle();
  return c.launch(
      self, nonblocking, py::make_tuple(tensor, out), out, [&](chorus_request_t* request) {
        return request
                   ? chorus_iscatter(h, in.data, result.data, result.count, result.dtype, root,
                                     request)
                   : chorus_scatter(h, in.data, result.data, result.count, result.dtype, root, ms);
      });
}

Obj alltoall(Self self, Obj tensor, Obj out, Obj timeout, bool nonblocking) {
  Comm& c = self.cast<Comm&>();
  const auto size = static_cast<std::size_t>(c.size());
  Buffer in, result;
  std::int64_t ms = 0;
  c.read_arguments([&] {
    in = buffer_of(tensor, "tensor", false);
    require_blocks(in, size, "alltoall");
    if (out.is_none()) out = empty_like(tensor, shape_of(tensor));
    result = buffer_of(out, "out", true);
    same_size(in, result, 1, "alltoall");
    ms = timeout_ms_of(timeout);
  });
  chorus_comm_t h = c.handle();
  const std::size_t block = in.count / size;
  return c.launch(
      self, nonblocking, py::make_tuple(tensor, out), out, [&](chorus_request_t* request) {
        return request ? chorus_ialltoall(h, in.data, result.data, block, in.dtype, request)
                       : chorus_alltoall(h, in.data, result.data, block, in.dtype, ms);
      });
}

// Checks that counts has an entry per rank; returns their sum.
std::size_t total_of(const std::vector<std::size_t>& counts, std::size_t size, const char* what) {
  if (counts.size() != size)
    throw ArgumentError(std::string(what) + ": counts has " + std::to_string(counts.size()) +
                        " entries, the communicator " + std::to_string(size) + " ranks");
  std::size_t total = 0;
  for (auto n : counts) total += n;
  return total;
}

Obj allgatherv(Self self, Obj tensor, std::vector<std::size_t> counts, Obj out, Obj timeout,
               bool nonblocking) {
  Comm& c = self.cast<Comm&>();
  const auto size = static_cast<std::size_t>(c.size());
  const auto rank = static_cast<std::size_t>(c.rank());
  Buffer in, result;
  std::int64_t ms = 0;
  c.read_arguments([&] {
    const std::size_t total = total_of(counts, size, "allgatherv");
    in = buffer_of(tensor, "tensor", false);
    if (in.count != counts[rank])
      throw ArgumentError("allgatherv: this rank's tensor holds " + std::to_string(in.count) +
                          " elements, counts[" + std::to_string(rank) + "] says " +
                          std::to_string(counts[rank]));
    if (out.is_none()) out = empty_like(tensor, py::make_tuple(total));
    result = buffer_of(out, "out", true);
    Buffer whole{in.data, total, in.dtype};
    same_size(whole, result, 1, "allgatherv");
    ms = timeout_ms_of(timeout);
  });
  chorus_comm_t h = c.handle();
  return c.launch(
      self, nonblocking, py::make_tuple(tensor, out), out, [&](chorus_request_t* request) {
        return request
                   ? chorus_iallgatherv(h, in.data, result.data, counts.data(), in.dtype, request)
                   : chorus_allgatherv(h, in.data, result.data, counts.data(), in.dtype, ms);
      });
}

Obj reduce_scatterv(Self self, Obj tensor, std::vector<std::size_t> counts, Obj out, int op,
                    Obj timeout, bool nonblocking) {
  Comm& c = self.cast<Comm&>();
  const auto size = static_cast<std::size_t>(c.size());
  const auto rank = static_cast<std::size_t>(c.rank());
  Buffer in, result;
  std::int64_t ms = 0;
  c.read_arguments([&] {
    const std::size_t total = total_of(counts, size, "reduce_scatterv");
    in = buffer_of(tensor, "tensor", false);
    if (in.count != total)
      throw ArgumentError("reduce_scatterv: the tensor holds " + std::to_string(in.count) +
                          " elements, the counts add up to " + std::to_string(total));
    if (out.is_none()) out = empty_like(tensor, py::make_tuple(counts[rank]));
    result = buffer_of(out, "out", true);
    Buffer mine{in.data, counts[rank], in.dtype};
    same_size(mine, result, 1, "reduce_scatterv");
    ms = timeout_ms_of(timeout);
  });
  chorus_comm_t h = c.handle();
  auto reduce = static_cast<chorus_op_t>(op);
  return c.launch(self, nonblocking, py::make_tuple(tensor, out), out,
                  [&](chorus_request_t* request) {
                    return request ? chorus_ireduce_scatterv(h, in.data, result.data, counts.data(),
                                                             in.dtype, reduce, request)
                                   : chorus_reduce_scatterv(h, in.data, result.data, counts.data(),
                                                            in.dtype, reduce, ms);
                  });
}

Obj barrier(Self self, Obj timeout, bool nonblocking) {
  Comm& c = self.cast<Comm&>();
  std::int64_t ms = 0;
  c.read_arguments([&] { ms = timeout_ms_of(timeout); });
  chorus_comm_t h = c.handle();
  return c.launch(self, nonblocking, py::none(), py::none(), [&](chorus_request_t* request) {
    return request ? chorus_ibarrier(h, request) : chorus_barrier(h, ms);
  });
}

Obj send(Self self, Obj tensor, int peer, int tag, Obj timeout, bool nonblocking) {
  Comm& c = self.cast<Comm&>();
  const OneBuffer one = read_one(c, tensor, false, timeout);
  const Buffer& buffer = one.buffer;
  const std::int64_t ms = one.timeout_ms;
  chorus_comm_t h = c.handle();
  return c.launch(self, nonblocking, tensor, py::none(), [&](chorus_request_t* request) {
    return request ? chorus_isend(h, buffer.data, buffer.count, buffer.dtype, peer, tag, request)
                   : chorus_send(h, buffer.data, buffer.count, buffer.dtype, peer, tag, ms);
  });
}

Obj recv(Self self, Obj tensor, int peer, int tag, Obj timeout, bool nonblocking) {
  Comm& c = self.cast<Comm&>();
  const OneBuffer one = read_one(c, tensor, true, timeout);
  const Buffer& buffer = one.buffer;
  const std::int64_t ms = one.timeout_ms;
  chorus_comm_t h = c.handle();
  return c.launch(self, nonblocking, tensor, tensor, [&](chorus_request_t* request) {
    return request ? chorus_irecv(h, buffer.data, buffer.count, buffer.dtype, peer, tag, request)
                   : chorus_recv(h, buffer.data, buffer.count, buffer.dtype, peer, tag, ms);
  });
}

Obj fused_allreduce(Self self, const std::string& name, Obj tensor, Obj out, int op) {
  Comm& c = self.cast<Comm&>();
  Buffer in, result;
  c.read_arguments([&] {
    in = buffer_of(tensor, "tensor", out.is_none());
    result = out.is_none() ? in : buffer_of(out, "out", true);
    same_size(in, result, 1, "fused_allreduce");
  });
  chorus_comm_t h = c.handle();
  return c.launch(self, true, py::make_tuple(tensor, out), out.is_none() ? tensor : out,
                  [&](chorus_request_t* request) {
                    return chorus_fused_allreduce(h, name.c_str(), in.data, result.data, in.count,
                                                  in.dtype, static_cast<chorus_op_t>(op), request);
                  });
}

void fusion_configure(Comm& c, double cycle_ms, std::uint64_t fusion_bytes,
                      std::uint64_t alone_bytes, double stall_s, Obj wire) {
  chorus_fusion_options_t options = CHORUS_FUSION_OPTIONS_INITIALIZER;
  options.cycle_ms = cycle_ms;
  options.fusion_bytes = fusion_bytes;
  options.alone_bytes = alone_bytes;
  options.stall_s = stall_s;
  c.read_arguments([&] { options.wire_dtype = wire_dtype_of(wire); });
  c.check(chorus_fusion_configure(c.handle(), &options));
}

py::dict fusion_stats(Comm& c) {
  chorus_fusion_stats_t stats{};
  stats.size = sizeof stats;
  c.check(chorus_fusion_stats(c.handle(), &stats));
  py::dict out;
  out["cycles"] = stats.cycles;
  out["fast_cycles"] = stats.fast_cycles;
  out["slow_cycles"] = stats.slow_cycles;
  out["allreduces"] = stats.allreduces;
  out["tensors"] = stats.tensors;
  out["bytes"] = stats.bytes;
  return out;
}

Obj split(Comm& c, Obj color, Obj key) {
  const int colour = color.is_none() ? CHORUS_UNDEFINED : color.cast<int>();
  const int order = key.is_none() ? c.rank() : key.cast<int>();
  chorus_comm_t made = nullptr;
  chorus_comm_t h = c.handle();
  chorus_result_t result;
  {
    py::gil_scoped_release release;
    result = chorus_comm_split(h, colour, order, &made);
  }
  if (result != CHORUS_SUCCESS) raise_result(result, h);
  return made ? wrap_comm(made) : py::none();
}

}  // namespace

void bind_collectives(py::class_<Comm>& comm) {
  const auto timeout = py::arg("timeout") = py::none();
  const auto nonblocking = py::arg("nonblocking") = false;
  const auto out = py::arg("out") = py::none();
  const auto op = py::arg("op") = static_cast<int>(CHORUS_SUM);
  const auto root = py::arg("root") = 0;
  comm.def("split", &split, py::arg("color"), py::arg("key") = py::none(),
           "Collective: ranks passing the same color form a new Comm, ordered by (key, rank); "
           "color None gives None")
      .def("allreduce", &allreduce, py::arg("tensor"), out, op, timeout,
           py::arg("wire_dtype") = py::none(), nonblocking,
           "Reduces tensor over every rank, in place (or into out); returns the output")
      .def("broadcast", &broadcast, py::arg("tensor"), root, timeout, nonblocking)
      .def("allgather", &allgather, py::arg("tensor"), out, timeout, nonblocking,
           "Every rank's tensor, stacked in rank order")
      .def("reduce_scatter", &reduce_scatter, py::arg("tensor"), out, op, timeout, nonblocking)
      .def("reduce", &reduce, py::arg("tensor"), out, op, root, timeout, nonblocking,
           "The reduction at root (None elsewhere)")
      .def("gather", &gather, py::arg("tensor"), out, root, timeout, nonblocking)
      .def("scatter", &scatter, py::arg("tensor"), out, root, timeout, nonblocking,
           "Block r of root's tensor to rank r; other ranks pass tensor=None and out")
      .def("alltoall", &alltoall, py::arg("tensor"), out, timeout, nonblocking)
      .def("allgatherv", &allgatherv, py::arg("tensor"), py::arg("counts"), out, timeout,
           nonblocking)
      .def("reduce_scatterv", &reduce_scatterv, py::arg("tensor"), py::arg("counts"), out, op,
           timeout, nonblocking)
      .def("barrier", &barrier, timeout, nonblocking)
      .def("send", &send, py::arg("tensor"), py::arg("peer"), py::arg("tag") = 0, timeout,
           nonblocking)
      .def("recv", &recv, py::arg("tensor"), py::arg("peer"), py::arg("tag") = 0, timeout,
           nonblocking)
      .def("fused_allreduce", &fused_allreduce, py::arg("name"), py::arg("tensor"), out, op,
           "Hands a named tensor to the fusion engine; returns a Request")
      .def("fusion_configure", &fusion_configure, py::arg("cycle_ms") = 0.0,
           py::arg("fusion_bytes") = 0, py::arg("alone_bytes") = 0, py::arg("stall_s") = 0.0,
           py::arg("wire_dtype") = py::none())
      .def("fusion_stats", &fusion_stats);
}

}  // namespace chorus_py
