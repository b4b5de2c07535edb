// extern "C" entry points of the collectives, point-to-point messages and
// chorus_comm_split (include/chorus.h). Each builds the C++ call and runs it
// under guarded(), which catches everything.
#include <fmt/format.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "lib/api/entry.hpp"
#include "lib/api/handles.hpp"

using chorus::CollectiveCall;
using chorus::CollectiveKind;
using chorus::DataType;
using chorus::Deadline;
using chorus::ReduceOp;
using chorus::UsageError;
using chorus::api::check_out;
using chorus::api::deadline_from;
using chorus::api::to_dtype;
using chorus::api::to_op;

namespace {

using chorus::api::guarded;
using chorus::api::lookup;
using chorus::api::on_comm;

// A collective call from the C arguments (kind, buffers, counts, dtype, op, root).
CollectiveCall make_call(CollectiveKind kind, const void* send, void* recv, size_t count,
                         const size_t* counts, chorus_dtype_t dtype, chorus_op_t op, int root) {
  const std::string name(chorus::collective_name(kind));
  CollectiveCall call;
  call.kind = kind;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.counts = counts;
  if (kind != CollectiveKind::barrier) call.dtype = to_dtype(dtype, name.c_str());
  if (chorus::reduces(kind)) call.op = to_op(op, name.c_str());
  call.root = root;
  return call;
}

// chorus_allreduce_options_t's wire dtype as CollectiveCall::wire.
std::optional<DataType> wire_of(const chorus_allreduce_options_t* options) {
  if (!options) return std::nullopt;
  constexpr std::size_t kFirstVersion =
      offsetof(chorus_allreduce_options_t, wire_dtype) + sizeof(chorus_dtype_t);
  if (options->size < kFirstVersion)
    throw UsageError(fmt::format(
        "allreduce: chorus_allreduce_options_t of size {} (this library's is {}); start it with "
        "CHORUS_ALLREDUCE_OPTIONS_INITIALIZER",
        options->size, sizeof(chorus_allreduce_options_t)));
  const chorus_dtype_t w = options->wire_dtype;
  if (w == CHORUS_WIRE_DTYPE_DEFAULT) return std::nullopt;
  if (w != CHORUS_FLOAT32 && w != CHORUS_BFLOAT16 && w != CHORUS_FLOAT16)
    throw UsageError(fmt::format(
        "allreduce: options wire_dtype {} is not CHORUS_FLOAT32 (uncompressed), CHORUS_BFLOAT16, "
        "CHORUS_FLOAT16 or CHORUS_WIRE_DTYPE_DEFAULT",
        static_cast<int>(w)));
  return static_cast<DataType>(w);
}

CollectiveCall allreduce_call(const void* send, void* recv, size_t count, chorus_dtype_t dtype,
                              chorus_op_t op, const chorus_allreduce_options_t* options) {
  CollectiveCall call =
      make_call(CollectiveKind::allreduce, send, recv, count, nullptr, dtype, op, -1);
  call.wire = wire_of(options);
  return call;
}

// Runs make_call inside guarded too: a bad dtype or op is an error code.
template <typename Make>
chorus_result_t blocking(chorus_comm_t comm, int64_t timeout_ms, Make&& make) {
  return guarded(comm, [&] {
    on_comm(comm, [&](chorus::Communicator& c) { c.run(make(), deadline_from(c, timeout_ms)); });
  });
}

chorus_result_t start(chorus_comm_t handle, chorus_request_t* request,
                      const std::function<chorus::WorkPtr(chorus::Communicator&)>& submit) {
  return guarded(handle, [&] {
    check_out(request, "request");
    *request = nullptr;
    on_comm(handle, [&](chorus::Communicator& comm) {
      auto work = submit(comm);
      *request = new chorus_request{std::move(work), std::nullopt, handle, comm.wait_spin()};
    });
  });
}

template <typename Make>
chorus_result_t nonblocking(chorus_comm_t comm, chorus_request_t* request, Make&& make) {
  return start(comm, request, [&](chorus::Communicator& c) { return c.submit(make()); });
}

chorus_result_t start_message(chorus_comm_t handle, chorus_request_t* request,
                              const std::function<chorus::Message(chorus::Communicator&)>& post) {
  return guarded(handle, [&] {
    check_out(request, "request");
    *request = nullptr;
    on_comm(handle, [&](chorus::Communicator& comm) {
      auto message = post(comm);
      *request = new chorus_request{nullptr, std::move(message), handle, comm.wait_spin()};
    });
  });
}

}  // namespace

extern "C" {

chorus_result_t chorus_allreduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                 size_t count, chorus_dtype_t dtype, chorus_op_t op,
                                 int64_t timeout_ms) {
  return blocking(comm, timeout_ms, [&] {
    return make_call(CollectiveKind::allreduce, sendbuf, recvbuf, count, nullptr, dtype, op, -1);
  });
}

chorus_result_t chorus_broadcast(chorus_comm_t comm, void* buf, size_t count, chorus_dtype_t dtype,
                                 int root, int64_t timeout_ms) {
  return blocking(comm, timeout_ms, [&] {
    return make_call(CollectiveKind::broadcast, buf, buf, count, nullptr, dtype, CHORUS_SUM, root);
  });
}

chorus_result_t chorus_allgather(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                 size_t sendcount, chorus_dtype_t dtype, int64_t timeout_ms) {
  return blocking(comm, timeout_ms, [&] {
    return make_call(CollectiveKind::allgather, sendbuf, recvbuf, sendcount, nullptr, dtype,
                     CHORUS_SUM, -1);
  });
}

chorus_result_t chorus_reduce_scatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                      size_t recvcount, chorus_dtype_t dtype, chorus_op_t op,
                                      int64_t timeout_ms) {
  return blocking(comm, timeout_ms, [&] {
    return make_call(CollectiveKind::reduce_scatter, sendbuf, recvbuf, recvcount, nullptr, dtype,
                     op, -1);
  });
}

chorus_result_t chorus_barrier(chorus_comm_t comm, int64_t timeout_ms) {
  return blocking(comm, timeout_ms, [&] {
    return make_call(CollectiveKind::barrier, nullptr, nullptr, 0, nullptr, CHORUS_UINT8,
                     CHORUS_SUM, -1);
  });
}

chorus_result_t chorus_reduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                              chorus_dtype_t dtype, chorus_op_t op, int root, int64_t timeout_ms) {
  return blocking(comm, timeout_ms, [&] {
    return make_call(CollectiveKind::reduce, sendbuf, recvbuf, count, nullptr, dtype, op, root);
  });
}

chorus_result_t chorus_gather(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                              size_t sendcount, chorus_dtype_t dtype, int root,
                              int64_t timeout_ms) {
  return blocking(comm, timeout_ms, [&] {
    return make_call(CollectiveKind::gather, sendbuf, recvbuf, sendcount, nullptr, dtype,
                     CHORUS_SUM, root);
  });
}

chorus_result_t chorus_scatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                               size_t recvcount, chorus_dtype_t dtype, int root,
                               int64_t timeout_ms) {
  return blocking(comm, timeout_ms, [&] {
    return make_call(CollectiveKind::scatter, sendbuf, recvbuf, recvcount, nullptr, dtype,
                     CHORUS_SUM, root);
  });
}

chorus_result_t chorus_alltoall(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                size_t count, chorus_dtype_t dtype, int64_t timeout_ms) {
  return blocking(comm, timeout_ms, [&] {
    return make_call(CollectiveKind::alltoall, sendbuf, recvbuf, count, nullptr, dtype, CHORUS_SUM,
                     -1);
  });
}

chorus_result_t chorus_allgatherv(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                  const size_t* recvcounts, chorus_dtype_t dtype,
                                  int64_t timeout_ms) {
  return blocking(comm, timeout_ms, [&] {
    return make_call(CollectiveKind::allgatherv, sendbuf, recvbuf, 0, recvcounts, dtype, CHORUS_SUM,
                     -1);
  });
}

chorus_result_t chorus_reduce_scatterv(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                       const size_t* recvcounts, chorus_dtype_t dtype,
                                       chorus_op_t op, int64_t timeout_ms) {
  return blocking(comm, timeout_ms, [&] {
    return make_call(CollectiveKind::reduce_scatterv, sendbuf, recvbuf, 0, recvcounts, dtype, op,
                     -1);
  });
}

chorus_result_t chorus_iallreduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                  size_t count, chorus_dtype_t dtype, chorus_op_t op,
                                  chorus_request_t* request) {
  return nonblocking(comm, request, [&] {
    return make_call(CollectiveKind::allreduce, sendbuf, recvbuf, count, nullptr, dtype, op, -1);
  });
}

chorus_result_t chorus_allreduce_ex(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                    size_t count, chorus_dtype_t dtype, chorus_op_t op,
                                    const chorus_allreduce_options_t* options, int64_t timeout_ms) {
  return blocking(comm, timeout_ms,
                  [&] { return allreduce_call(sendbuf, recvbuf, count, dtype, op, options); });
}

chorus_result_t chorus_iallreduce_ex(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                     size_t count, chorus_dtype_t dtype, chorus_op_t op,
                                     const chorus_allreduce_options_t* options,
                                     chorus_request_t* request) {
  return nonblocking(comm, request,
                     [&] { return allreduce_call(sendbuf, recvbuf, count, dtype, op, options); });
}

chorus_result_t chorus_ibroadcast(chorus_comm_t comm, void* buf, size_t count, chorus_dtype_t dtype,
                                  int root, chorus_request_t* request) {
  return nonblocking(comm, request, [&] {
    return make_call(CollectiveKind::broadcast, buf, buf, count, nullptr, dtype, CHORUS_SUM, root);
  });
}

chorus_result_t chorus_iallgather(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                  size_t sendcount, chorus_dtype_t dtype,
                                  chorus_request_t* request) {
  return nonblocking(comm, request, [&] {
    return make_call(CollectiveKind::allgather, sendbuf, recvbuf, sendcount, nullptr, dtype,
                     CHORUS_SUM, -1);
  });
}

chorus_result_t chorus_ireduce_scatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                       size_t recvcount, chorus_dtype_t dtype, chorus_op_t op,
                                       chorus_request_t* request) {
  return nonblocking(comm, request, [&] {
    return make_call(CollectiveKind::reduce_scatter, sendbuf, recvbuf, recvcount, nullptr, dtype,
                     op, -1);
  });
}

chorus_result_t chorus_ibarrier(chorus_comm_t comm, chorus_request_t* request) {
  return nonblocking(comm, request, [&] {
    return make_call(CollectiveKind::barrier, nullptr, nullptr, 0, nullptr, CHORUS_UINT8,
                     CHORUS_SUM, -1);
  });
}

chorus_result_t chorus_ireduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                               chorus_dtype_t dtype, chorus_op_t op, int root,
                               chorus_request_t* request) {
  return nonblocking(comm, request, [&] {
    return make_call(CollectiveKind::reduce, sendbuf, recvbuf, count, nullptr, dtype, op, root);
  });
}

chorus_result_t chorus_igather(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                               size_t sendcount, chorus_dtype_t dtype, int root,
                               chorus_request_t* request) {
  return nonblocking(comm, request, [&] {
    return make_call(CollectiveKind::gather, sendbuf, recvbuf, sendcount, nullptr, dtype,
                     CHORUS_SUM, root);
  });
}

chorus_result_t chorus_iscatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                size_t recvcount, chorus_dtype_t dtype, int root,
                                chorus_request_t* request) {
  return nonblocking(comm, request, [&] {
    return make_call(CollectiveKind::scatter, sendbuf, recvbuf, recvcount, nullptr, dtype,
                     CHORUS_SUM, root);
  });
}

chorus_result_t chorus_ialltoall(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                 size_t count, chorus_dtype_t dtype, chorus_request_t* request) {
  return nonblocking(comm, request, [&] {
    return make_call(CollectiveKind::alltoall, sendbuf, recvbuf, count, nullptr, dtype, CHORUS_SUM,
                     -1);
  });
}

chorus_result_t chorus_iallgatherv(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                   const size_t* recvcounts, chorus_dtype_t dtype,
                                   chorus_request_t* request) {
  return nonblocking(comm, request, [&] {
    return make_call(CollectiveKind::allgatherv, sendbuf, recvbuf, 0, recvcounts, dtype, CHORUS_SUM,
                     -1);
  });
}

chorus_result_t chorus_ireduce_scatterv(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                        const size_t* recvcounts, chorus_dtype_t dtype,
                                        chorus_op_t op, chorus_request_t* request) {
  return nonblocking(comm, request, [&] {
    return make_call(CollectiveKind::reduce_scatterv, sendbuf, recvbuf, 0, recvcounts, dtype, op,
                     -1);
  });
}

chorus_result_t chorus_send(chorus_comm_t comm, const void* buf, size_t count, chorus_dtype_t dtype,
                            int peer, int tag, int64_t timeout_ms) {
  return guarded(comm, [&] {
    on_comm(comm, [&](chorus::Communicator& c) {
      c.send(buf, count, to_dtype(dtype, "send"), peer, tag, deadline_from(c, timeout_ms));
    });
  });
}

chorus_result_t chorus_recv(chorus_comm_t comm, void* buf, size_t count, chorus_dtype_t dtype,
                            int peer, int tag, int64_t timeout_ms) {
  return guarded(comm, [&] {
    on_comm(comm, [&](chorus::Communicator& c) {
      c.recv(buf, count, to_dtype(dtype, "recv"), peer, tag, deadline_from(c, timeout_ms));
    });
  });
}

chorus_result_t chorus_isend(chorus_comm_t comm, const void* buf, size_t count,
                             chorus_dtype_t dtype, int peer, int tag, chorus_request_t* request) {
  return start_message(comm, request, [&](chorus::Communicator& c) {
    return c.isend(buf, count, to_dtype(dtype, "send"), peer, tag);
  });
}

chorus_result_t chorus_irecv(chorus_comm_t comm, void* buf, size_t count, chorus_dtype_t dtype,
                             int peer, int tag, chorus_request_t* request) {
  return start_message(comm, request, [&](chorus::Communicator& c) {
    return c.irecv(buf, count, to_dtype(dtype, "recv"), peer, tag);
  });
}

chorus_result_t chorus_comm_split(chorus_comm_t comm, int color, int key, chorus_comm_t* newcomm) {
  return guarded(comm, [&] {
    check_out(newcomm, "newcomm");
    *newcomm = nullptr;
    auto& c = lookup(comm);
    auto child = c.split(color, key, c.default_deadline());
    if (!child) return;
    auto handle = std::make_unique<chorus_comm>();
    handle->comm = std::move(child);
    chorus_comm_t raw = handle.release();
    chorus::api::register_comm(raw);
    *newcomm = raw;
  });
}

}  // extern "C"
