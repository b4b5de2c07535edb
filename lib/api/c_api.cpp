// extern "C" entry points of include/chorus.h: versions, result strings and
// communicators (the calls themselves: c_calls.cpp; waiting for requests:
// c_requests.cpp). Each catches everything.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_set>

#include "base/core/error.hpp"
#include "lib/api/entry.hpp"
#include "lib/api/handles.hpp"

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
// This thread's last error per communicator handle (nullptr: none named).
// Most threads never see an error: the map stays empty and a call's clearing
// is one test.
thread_local std::unordered_map<chorus_comm_t, std::string> last_errors;
// Errors ever recorded, by any thread: while none has been, every thread's
// map is empty and a call's clearing does not touch thread-local storage
// (which costs a call into the dynamic linker from a shared library).
std::atomic<bool> any_error_recorded{false};

}  // namespace

void register_comm(chorus_comm_t comm) {
  clear_last_error(comm);  // a destroyed handle's address may come back
  std::lock_guard lock(live_mutex);
  live_comms().insert(comm);
}

bool unregister_comm(chorus_comm_t comm) {
  std::lock_guard lock(live_mutex);
  live_generation.fetch_add(1, std::memory_order_acq_rel);
  return live_comms().erase(comm) > 0;
}

void release_request(chorus_request* request) {
  if (request->fused) {
    // The request lies inside its tensor (FusedRequest): dropping its own
    // reference frees both, unless the engine still holds the tensor.
    const chorus::fusion::FusedPtr container = std::move(request->fused);
    return;
  }
  delete request;
}

bool is_live(chorus_comm_t comm) {
  if (comm && comm == last_checked.comm &&
      last_checked.generation == live_generation.load(std::memory_order_acquire))
    return true;
  std::lock_guard lock(live_mutex);
  return comm && live_comms().count(comm) > 0;
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

void set_last_error(chorus_comm_t comm, const std::string& message) {
  any_error_recorded.store(true, std::memory_order_relaxed);
  last_errors[comm] = message;
}
void clear_last_error(chorus_comm_t comm) {
  // Relaxed is enough: only this thread's own earlier stores matter here.
  if (!any_error_recorded.load(std::memory_order_relaxed)) return;
  if (!last_errors.empty()) last_errors.erase(comm);
}
const char* last_error(chorus_comm_t comm) {
  auto it = last_errors.find(comm);
  return it == last_errors.end() ? "" : it->second.c_str();
}

}  // namespace chorus::api

namespace {

using chorus::api::check_out;
using chorus::api::guarded;
using chorus::api::lookup;

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
  return guarded(nullptr, [&] {
    check_out(comm, "comm");
    *comm = nullptr;
    check_out(config, "config");
    *comm = chorus::api::init_communicator(config);
  });
}

chorus_result_t chorus_init_with_store(const chorus_init_config_t* config,
                                       const chorus_store_ops_t* store, chorus_comm_t* comm) {
  return guarded(nullptr, [&] {
    if (!store) throw UsageError("store is NULL");
    // The store's context is Chorus's from here: released on every path.
    chorus_store_ops_t ops = *store;
    if (!comm || !config) {
      if (ops.size >= sizeof(chorus_store_ops_t) && ops.release) ops.release(ops.context);
      check_out(comm, "comm");
      check_out(config, "config");
    }
    *comm = nullptr;
    *comm = chorus::api::init_communicator_with_store(*config, ops);
  });
}

chorus_result_t chorus_init_from_env(chorus_comm_t* comm) {
  return guarded(nullptr, [&] {
    check_out(comm, "comm");
    *comm = nullptr;
    *comm = chorus::api::init_communicator(nullptr);
  });
}

chorus_result_t chorus_comm_destroy(chorus_comm_t comm) {
  return guarded(comm, [&] {
    if (!comm) return;
    if (!chorus::api::unregister_comm(comm))
      throw UsageError(CHORUS_ERR_INVALID_USAGE, "chorus_comm_destroy: handle is not live");
    std::unique_ptr<chorus_comm> owned(comm);
    owned->fusion.shutdown();
    owned->comm->destroy();
  });
}

chorus_result_t chorus_comm_abort(chorus_comm_t comm, const char* reason) {
  return guarded(comm, [&] { lookup(comm).abort(reason ? reason : "chorus_comm_abort"); });
}

chorus_result_t chorus_comm_fail(chorus_comm_t comm, chorus_result_t code, const char* reason) {
  std::string message;
  chorus_result_t rc = guarded(comm, [&] {
    if (code <= CHORUS_SUCCESS || code >= CHORUS_RESULT_COUNT_)
      throw UsageError(
          fmt::format("chorus_comm_fail: {} is not an error code", static_cast<int>(code)));
    auto& c = lookup(comm);
    message = fmt::format("rank {}: {}", c.rank(), reason ? reason : "chorus_comm_fail");
    c.fail(code, message);
  });
  if (rc == CHORUS_SUCCESS) chorus::api::set_last_error(comm, message);
  return rc;
}

chorus_result_t chorus_comm_rank(chorus_comm_t comm, int* rank) {
  return guarded(comm, [&] {
    check_out(rank, "rank");
    *rank = lookup(comm).rank();
  });
}

chorus_result_t chorus_comm_size(chorus_comm_t comm, int* size) {
  return guarded(comm, [&] {
    check_out(size, "size");
    *size = lookup(comm).size();
  });
}

const char* chorus_comm_last_error(chorus_comm_t comm) {
  return chorus::api::last_error(comm);
}

}  // extern "C"
