// extern "C" entry points of the fusion engine (include/chorus.h): tensors
// handed to the communicator's engine (lib/fusion/engine.hpp), made on the
// first fused call, and its counters.
#include <fmt/format.h>

#include <cstring>
#include <string>

#include "base/core/block_cache.hpp"
#include "collectives/call.hpp"
#include "lib/api/entry.hpp"
#include "lib/api/handles.hpp"

using chorus::api::check_out;
using chorus::api::guarded;
using chorus::api::on_comm;

namespace {

constexpr std::size_t kMaxName = 65535;

}  // namespace

extern "C" {

chorus_result_t chorus_fused_allreduce(chorus_comm_t comm, const char* name, const void* sendbuf,
                                       void* recvbuf, size_t count, chorus_dtype_t dtype,
                                       chorus_op_t op, chorus_request_t* request) {
  return guarded(comm, [&] {
    check_out(request, "request");
    *request = nullptr;
    on_comm(comm, [&](chorus::Communicator& c) {
      if (!name || !*name) throw chorus::UsageError("fused allreduce: the tensor name is empty");
      const std::size_t length = std::strlen(name);
      if (length > kMaxName)
        throw chorus::UsageError(fmt::format(
            "fused allreduce: a tensor name of {} bytes (at most {})", length, kMaxName));
      const chorus::fusion::TensorShape shape{count,
                                              chorus::api::to_dtype(dtype, "fused allreduce"),
                                              chorus::api::to_op(op, "fused allreduce")};
      try {
        chorus::validate_allreduce_buffers(sendbuf, recvbuf, count, chorus::dtype_size(shape.dtype),
                                           "allreduce");
      } catch (const chorus::UsageError& e) {
        throw chorus::UsageError(e.code(), fmt::format("fused {} (tensor '{}')", e.what(), name));
      }
      auto fused = std::allocate_shared<chorus::api::FusedRequest>(
          chorus::CachingAllocator<chorus::api::FusedRequest>());
      fused->shape = shape;
      fused->send = sendbuf;
      fused->recv = recvbuf;
      // Member by member: a whole chorus_request built and moved in costs
      // more than the rest of the call.
      chorus_request& handle = fused->request;
      handle.owner = comm;
      handle.spin = c.wait_spin();
      // Lent to the engine, no reference counted (Engine::submit): the
      // request frees it, and only once it is done (chorus_wait,
      // chorus_test). The request's own reference, which release_request
      // drops, is set once submit cannot throw.
      comm->fusion.engine(c).submit(
          std::string_view(name, length),
          chorus::fusion::FusedPtr(chorus::fusion::FusedPtr(), fused.get()));
      handle.fused = std::move(fused);
      *request = &handle;
    });
  });
}

chorus_result_t chorus_fusion_configure(chorus_comm_t comm,
                                        const chorus_fusion_options_t* options) {
  return guarded(comm, [&] {
    check_out(options, "options");
    if (options->size < sizeof(chorus_fusion_options_t))
      throw chorus::UsageError(
          fmt::format("chorus_fusion_configure: options->size {} (expected {}); start it with "
                      "CHORUS_FUSION_OPTIONS_INITIALIZER",
                      options->size, sizeof(chorus_fusion_options_t)));
    auto& c = chorus::api::lookup(comm);
    auto o = chorus::fusion::EngineOptions::from(c.config());
    if (options->cycle_ms < 0 || options->cycle_ms > 10000 || options->stall_s < 0)
      throw chorus::UsageError(
          fmt::format("chorus_fusion_configure: cycle_ms {} or stall_s {} out of range",
                      options->cycle_ms, options->stall_s));
    if (options->cycle_ms > 0) o.cycle_ms = options->cycle_ms;
    if (options->fusion_bytes > 0) o.fusion_bytes = options->fusion_bytes;
    if (options->alone_bytes > 0) o.alone_bytes = options->alone_bytes;
    if (options->stall_s > 0) o.stall_s = options->stall_s;
    const chorus_dtype_t w = options->wire_dtype;
    if (w != CHORUS_WIRE_DTYPE_DEFAULT) {
      if (w != CHORUS_FLOAT32 && w != CHORUS_BFLOAT16 && w != CHORUS_FLOAT16)
        throw chorus::UsageError(fmt::format(
            "chorus_fusion_configure: wire_dtype {} is not CHORUS_FLOAT32, CHORUS_BFLOAT16, "
            "CHORUS_FLOAT16 or CHORUS_WIRE_DTYPE_DEFAULT",
            static_cast<int>(w)));
      o.wire = static_cast<chorus::DataType>(w);
    }
    comm->fusion.configure(o);
  });
}

chorus_result_t chorus_fusion_stats(chorus_comm_t comm, chorus_fusion_stats_t* stats) {
  return guarded(comm, [&] {
    check_out(stats, "stats");
    if (stats->size < sizeof(chorus_fusion_stats_t))
      throw chorus::UsageError(fmt::format("chorus_fusion_stats: stats->size {} (expected {})",
                                           stats->size, sizeof(chorus_fusion_stats_t)));
    chorus::api::lookup(comm);
    const chorus::fusion::EngineStats s = comm->fusion.stats();
    stats->cycles = s.cycles;
    stats->fast_cycles = s.fast_cycles;
    stats->slow_cycles = s.slow_cycles;
    stats->allreduces = s.allreduces;
    stats->tensors = s.tensors;
    stats->bytes = s.bytes;
  });
}

}  // extern "C"
