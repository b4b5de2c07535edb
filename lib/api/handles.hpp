// What the C API's opaque handles hold, and how C entry points turn C++
// exceptions into result codes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "include/chorus.h"
#include "lib/comm/communicator.hpp"
#include "lib/fusion/engine_slot.hpp"

struct chorus_comm {
  std::unique_ptr<chorus::Communicator> comm;
  // The fusion engine, made by the first fused call (chorus_fused_allreduce
  // or a mirrored strategy's gradient), with chorus_fusion_configure's
  // settings. Shut down before the communicator is destroyed.
  chorus::fusion::EngineSlot fusion;
};

// A non-blocking call: a collective (work), a point-to-point message, or a
// tensor given to the fusion engine (fused).
struct chorus_request {
  chorus::WorkPtr work;
  std::optional<chorus::Message> message;
  chorus_comm_t owner;
  chorus::Spin spin;
  chorus::fusion::FusedPtr fused = nullptr;
  // Set only while chorus_wait_all / chorus_test_all check that no request
  // is listed twice (its first wait would free it under the second).
  bool listed = false;
};

namespace chorus::api {

// A fused request and its tensor in one allocation (a training step hands
// the engine hundreds of tensors), from a per-thread cache of such blocks
// (base/core/block_cache.hpp): the request's `fused` points at its own
// container, which so lives until chorus_wait or chorus_test finishes the
// request (release_request).
struct FusedRequest : chorus::fusion::FusedTensor {
  // User-provided, not defaulted: make_shared would otherwise zero the
  // whole object before constructing it, a cost paid on every fused call.
  FusedRequest() {}  // NOLINT(modernize-use-equals-default)
  chorus_request request;
};

// Frees a finished request (and its tensor, for a fused one).
void release_request(chorus_request* request);

// Live communicator handles: a handle not in the set (destroyed or never
// created) is refused with CHORUS_ERR_INVALID_USAGE instead of crashing.
void register_comm(chorus_comm_t comm);
bool unregister_comm(chorus_comm_t comm);
chorus::Communicator& lookup(chorus_comm_t comm);  // throws UsageError
bool is_live(chorus_comm_t comm);

// The last error per communicator and thread (chorus_comm_last_error); comm
// NULL for errors that concern no communicator (init, a NULL handle).
void set_last_error(chorus_comm_t comm, const std::string& message);
void clear_last_error(chorus_comm_t comm);
const char* last_error(chorus_comm_t comm);

// Runs fn, mapping every exception to a result code and recording its
// message as comm's last error on this thread.
template <typename Fn>
chorus_result_t guarded(chorus_comm_t comm, Fn&& fn) noexcept;

chorus_comm_t init_communicator(const chorus_init_config_t* config);  // init.cpp
// Over the caller's store (chorus_init_with_store); takes ops.context over.
chorus_comm_t init_communicator_with_store(const chorus_init_config_t& config,
                                           const chorus_store_ops_t& ops);  // init.cpp

}  // namespace chorus::api

#include "lib/api/guarded.inl"
