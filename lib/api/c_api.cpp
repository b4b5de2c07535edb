// extern "C" entry points of include/chorus.h. Each catches everything.
#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <unordered_set>

#include "lib/api/handles.hpp"
#include "base/core/error.hpp"

using chorus::CollectiveCall;
using chorus::CollectiveKind;
using chorus::DataType;
using chorus::Deadline;
using chorus::ReduceOp;
using chorus::UsageError;

namespace chorus::api {
namespace {

std::mutex live_mutex;  // guards live_comms
std::unordered_set<chorus_comm_t>& live_comms() {
  static std::unordered_set<chorus_comm_t> set;
  return set;
}
// Bumped by every destroy: a thread's cached handle is live while the
// generation it was checked in is still the current one. The set and its
// mutex then stay off the per-call path.
std::atomic<uint64_t> live_generation{0};
struct CheckedHandle {
  chorus_comm_t comm = nullptr;
  uint64_t generation = 0;
};
thread_local CheckedHandle last_checked;
thread_local std::string last_error_message;

}  // namespace

void register_comm(chorus_comm_t comm) {
  std::lock_guard lock(live_mutex);
  live_comms().insert(comm);
}

bool unregister_comm(chorus_comm_t comm) {
  std::lock_guard lock(live_mutex);
  live_generation.fetch_add(1, std::memory_order_acq_rel);
  return live_comms().erase(comm) > 0;
}

Communicator& lookup(chorus_comm_t comm) {
  if (comm && comm == last_checked.comm &&
      last_checked.generation == live_generation.load(std::memory_order_acquire))
    return *comm->comm;
  std::lock_guard lock(live_mutex);
  if (!comm) throw UsageError("communicator handle is NULL");
  if (!live_comms().count(comm))
    throw UsageError(CHORUS_ERR_INVALID_USAGE,
                     "communicator handle is not live (used after chorus_comm_destroy?)");
  last_checked = {comm, live_generation.load(std::memory_order_relaxed)};
  return *comm->comm;
}

void set_last_error(const std::string& message) {
  last_error_message = message;
}
void clear_last_error() {
  last_error_message.clear();
}
const char* last_error() {
  return last_error_message.c_str();
}

}  // namespace chorus::api

namespace {

using chorus::api::guarded;
using chorus::api::lookup;

Deadline deadline_from(chorus::Communicator& comm, int64_t timeout_ms) {
  if (timeout_ms < 0)
    throw UsageError(fmt::format("timeout_ms {} is negative (0 means CHORUS_TIMEOUT)", timeout_ms));
  return timeout_ms == 0 ? comm.default_deadline() : Deadline::after_ms(timeout_ms);
}

DataType to_dtype(chorus_dtype_t d, const char* what) {
  if (!chorus::valid_dtype(d))
    throw UsageError(fmt::format("{}: unknown dtype {}", what, static_cast<int>(d)));
  return static_cast<DataType>(d);
}

ReduceOp to_op(chorus_op_t o, const char* what) {
  if (!chorus::valid_op(o))
    throw UsageError(fmt::format("{}: unknown reduction op {}", what, static_cast<int>(o)));
  return static_cast<ReduceOp>(o);
}

void check_out(const void* p, const char* name) {
  if (!p) throw UsageError(fmt::format("{} is NULL", name));
}

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

chorus_result_t run_call(chorus_comm_t comm, const CollectiveCall& call, int64_t timeout_ms) {
  return guarded([&] {
    auto& c = lookup(comm);
    c.run(call, deadline_from(c, timeout_ms));
  });
}

// Runs make_call inside guarded too: a bad dtype or op is an error code.
template <typename Make>
chorus_result_t blocking(chorus_comm_t comm, int64_t timeout_ms, Make&& make) {
  return guarded([&] {
    auto& c = lookup(comm);
    c.run(make(), deadline_from(c, timeout_ms));
  });
}

chorus_result_t start(chorus_comm_t handle, chorus_request_t* request,
                      const std::function<chorus::WorkPtr(chorus::Communicator&)>& submit) {
  return guarded([&] {
    check_out(request, "request");
    *request = nullptr;
    auto& comm = lookup(handle);
    auto work = submit(comm);
    *request = new chorus_request{std::move(work), std::nullopt, handle, comm.config().spin_us};
  });
}

template <typename Make>
chorus_result_t nonblocking(chorus_comm_t comm, chorus_request_t* request, Make&& make) {
  return start(comm, request, [&](chorus::Communicator& c) { return c.submit(make()); });
}

chorus_result_t start_message(chorus_comm_t handle, chorus_request_t* request,
                              const std::function<chorus::Message(chorus::Communicator&)>& post) {
  return guarded([&] {
    check_out(request, "request");
    *request = nullptr;
    auto& comm = lookup(handle);
    auto message = post(comm);
    *request = new chorus_request{nullptr, std::move(message), handle, comm.config().spin_us};
  });
}

}  // namespace

extern "C" {

int chorus_version(void) {
  return CHORUS_VERSION;
}

const char* chorus_result_string(chorus_result_t result) {
  switch (result) {
    case CHORUS_SUCCESS:
      return "success";
    case CHORUS_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case CHORUS_ERR_INVALID_USAGE:
      return "invalid usage (destroyed or aborted communicator?)";
    case CHORUS_ERR_TIMEOUT:
      return "timed out";
    case CHORUS_ERR_PEER_FAILURE:
      return "a peer rank failed";
    case CHORUS_ERR_MISMATCH:
      return "ranks issued mismatching collectives";
    case CHORUS_ERR_IO:
      return "system or network error";
    case CHORUS_ERR_BOOTSTRAP:
      return "bootstrap failed (store or peers unreachable)";
    case CHORUS_ERR_UNSUPPORTED:
      return "unsupported";
    case CHORUS_ERR_ABORTED:
      return "communicator aborted";
    case CHORUS_ERR_INTERNAL:
      return "internal error";
    case CHORUS_ERR_NO_MEMORY:
      return "out of memory";
    default:
      return "unknown result code";
  }
}

chorus_result_t chorus_init(const chorus_init_config_t* config, chorus_comm_t* comm) {
  return guarded([&] {
    check_out(comm, "comm");
    *comm = nullptr;
    check_out(config, "config");
    *comm = chorus::api::init_communicator(config);
  });
}

chorus_result_t chorus_init_from_env(chorus_comm_t* comm) {
  return guarded([&] {
    check_out(comm, "comm");
    *comm = nullptr;
    *comm = chorus::api::init_communicator(nullptr);
  });
}

chorus_result_t chorus_comm_destroy(chorus_comm_t comm) {
  return guarded([&] {
    if (!comm) return;
    if (!chorus::api::unregister_comm(comm))
      throw UsageError(CHORUS_ERR_INVALID_USAGE, "chorus_comm_destroy: handle is not live");
    std::unique_ptr<chorus_comm> owned(comm);
    owned->comm->destroy();
  });
}

chorus_result_t chorus_comm_abort(chorus_comm_t comm, const char* reason) {
  return guarded([&] { lookup(comm).abort(reason ? reason : "chorus_comm_abort"); });
}

chorus_result_t chorus_comm_rank(chorus_comm_t comm, int* rank) {
  return guarded([&] {
    check_out(rank, "rank");
    *rank = lookup(comm).rank();
  });
}

chorus_result_t chorus_comm_size(chorus_comm_t comm, int* size) {
  return guarded([&] {
    check_out(size, "size");
    *size = lookup(comm).size();
  });
}

const char* chorus_comm_last_error(chorus_comm_t) {
  return chorus::api::last_error();
}

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
    return make_call(CollectiveKind::alltoall, sendbuf, recvbuf, count, nullptr, dtype,
                     CHORUS_SUM, -1);
  });
}

chorus_result_t chorus_allgatherv(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                  const size_t* recvcounts, chorus_dtype_t dtype,
                                  int64_t timeout_ms) {
  return blocking(comm, timeout_ms, [&] {
    return make_call(CollectiveKind::allgatherv, sendbuf, recvbuf, 0, recvcounts, dtype,
                     CHORUS_SUM, -1);
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
    return make_call(CollectiveKind::alltoall, sendbuf, recvbuf, count, nullptr, dtype,
                     CHORUS_SUM, -1);
  });
}

chorus_result_t chorus_iallgatherv(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                   const size_t* recvcounts, chorus_dtype_t dtype,
                                   chorus_request_t* request) {
  return nonblocking(comm, request, [&] {
    return make_call(CollectiveKind::allgatherv, sendbuf, recvbuf, 0, recvcounts, dtype,
                     CHORUS_SUM, -1);
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
  return guarded([&] {
    auto& c = lookup(comm);
    c.send(buf, count, to_dtype(dtype, "send"), peer, tag, deadline_from(c, timeout_ms));
  });
}

chorus_result_t chorus_recv(chorus_comm_t comm, void* buf, size_t count, chorus_dtype_t dtype,
                            int peer, int tag, int64_t timeout_ms) {
  return guarded([&] {
    auto& c = lookup(comm);
    c.recv(buf, count, to_dtype(dtype, "recv"), peer, tag, deadline_from(c, timeout_ms));
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
  return guarded([&] {
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

chorus_result_t chorus_wait(chorus_request_t* request, int64_t timeout_ms) {
  bool finished = false;
  chorus_result_t result = guarded([&] {
    check_out(request, "request");
    check_out(*request, "*request");
    chorus_request& r = **request;
    if (timeout_ms < 0) throw UsageError("timeout_ms is negative (0 means CHORUS_TIMEOUT)");
    Deadline deadline =
        timeout_ms == 0 ? lookup(r.owner).default_deadline() : Deadline::after_ms(timeout_ms);
    if (r.message) {
      // On a timeout the message stays posted (its buffer still lent to the
      // library) and the request valid, as for a collective.
      try {
        lookup(r.owner).wait(*r.message, deadline, /*abort_on_timeout=*/false);
      } catch (const chorus::IoError& e) {
        finished = e.code() != CHORUS_ERR_TIMEOUT;
        throw;
      }
      finished = true;
      return;
    }
    // Waiting up to CHORUS_TIMEOUT, the thread runs the call itself if it has
    // not started yet (the call's own deadline is then the same). A shorter
    // wait leaves it to the worker, so that it returns on time and the
    // request stays valid.
    if (timeout_ms == 0 && !r.work->completion().done()) lookup(r.owner).run_queued_until(*r.work);
    if (!r.work->completion().wait(deadline, r.spin_us))
      throw chorus::IoError(CHORUS_ERR_TIMEOUT,
                            fmt::format("chorus_wait: {} not finished after {} ms",
                                        chorus::describe(r.work->signature()), timeout_ms));
    finished = true;
    r.work->completion().rethrow_if_failed();
  });
  if (finished) {
    delete *request;
    *request = nullptr;
  }
  return result;
}

chorus_result_t chorus_test(chorus_request_t* request, int* done) {
  bool finished = false;
  chorus_result_t result = guarded([&] {
    check_out(request, "request");
    check_out(*request, "*request");
    check_out(done, "done");
    chorus_request& r = **request;
    if (r.message) {
      *done = r.message->request->done() ? 1 : 0;
      if (!*done) return;
      finished = true;
      lookup(r.owner).wait(*r.message, Deadline::after_ms(0), false);  // reports its failure
      return;
    }
    *done = r.work->completion().done() ? 1 : 0;
    if (!*done) return;
    finished = true;
    r.work->completion().rethrow_if_failed();
  });
  if (finished) {
    delete *request;
    *request = nullptr;
  }
  return result;
}

}  // extern "C"
