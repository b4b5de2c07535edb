// extern "C" entry points of the parameter-server strategy (include/chorus.h,
// chorus_ps_*): a handle over chorus::strategy::ps::ParameterServer
// (lib/strategy/ps/parameter_server.hpp). Only the collective calls (create,
// start) fail the communicator when they refuse an argument; the others are
// local to this rank, whose peers wait in no matching call.
#include <fmt/format.h>

#include <cstddef>
#include <memory>
#include <string>

#include "lib/api/entry.hpp"
#include "lib/api/handles.hpp"
#include "lib/api/optimizer_options.hpp"
#include "lib/strategy/ps/parameter_server.hpp"

using chorus::UsageError;
using chorus::api::check_out;
using chorus::api::deadline_from;
using chorus::api::guarded;
using chorus::api::on_comm;
using chorus::strategy::ps::ParameterServer;

struct chorus_ps {
  chorus_comm_t comm;
  std::unique_ptr<ParameterServer> strategy;
};

namespace {

static_assert(static_cast<int>(chorus::strategy::ps::Mode::async) == CHORUS_PS_ASYNC);
static_assert(static_cast<int>(chorus::strategy::ps::Mode::sync) == CHORUS_PS_SYNC);
static_assert(static_cast<int>(chorus::strategy::ps::Mode::bounded) == CHORUS_PS_BOUNDED);
static_assert(static_cast<int>(chorus::strategy::ps::Role::chief) == CHORUS_PS_CHIEF);
static_assert(static_cast<int>(chorus::strategy::ps::Role::worker) == CHORUS_PS_WORKER);
static_assert(static_cast<int>(chorus::strategy::ps::Role::server) == CHORUS_PS_SERVER);

chorus_comm_t comm_of(chorus_ps_t ps) {
  return ps ? ps->comm : nullptr;
}

// A local call on a live strategy: its errors are comm's last error, but
// comm is not failed.
template <typename Body>
chorus_result_t on_strategy(chorus_ps_t ps, Body&& body) {
  return guarded(comm_of(ps), [&] {
    if (!ps) throw UsageError("the parameter-server strategy handle is NULL");
    body(*ps->strategy, chorus::api::lookup(ps->comm));
  });
}

chorus::strategy::ps::Options ps_options(const chorus_ps_options_t* options) {
  chorus::strategy::ps::Options o;
  if (!options) return o;
  if (options->size < sizeof(chorus_ps_options_t))
    throw UsageError(
        fmt::format("chorus_ps_create: options->size {} (expected {}); start it with "
                    "CHORUS_PS_OPTIONS_INITIALIZER",
                    options->size, sizeof(chorus_ps_options_t)));
  const int mode = static_cast<int>(options->mode);
  if (mode < 0 || mode >= CHORUS_PS_MODE_COUNT_)
    throw UsageError(fmt::format("chorus_ps_create: unknown mode {}", mode));
  o.servers = options->servers;
  o.mode = static_cast<chorus::strategy::ps::Mode>(mode);
  o.max_staleness = options->max_staleness;
  return o;
}

}  // namespace

extern "C" {

chorus_result_t chorus_ps_create(chorus_comm_t comm, const chorus_ps_options_t* options,
                                 chorus_ps_t* out) {
  return guarded(comm, [&] {
    check_out(out, "out");
    *out = nullptr;
    on_comm(comm, [&](chorus::Communicator& c) {
      auto strategy = std::make_unique<ParameterServer>(c, ps_options(options));
      *out = new chorus_ps{comm, std::move(strategy)};
    });
  });
}

chorus_result_t chorus_ps_role(chorus_ps_t ps, chorus_ps_role_t* role, int* index) {
  return on_strategy(ps, [&](ParameterServer& s, chorus::Communicator&) {
    check_out(role, "role");
    check_out(index, "index");
    *role = static_cast<chorus_ps_role_t>(s.role());
    *index = s.role_index();
  });
}

chorus_result_t chorus_ps_add_variable(chorus_ps_t ps, const char* name, void* data, void* gradient,
                                       size_t count, chorus_dtype_t dtype) {
  return on_strategy(ps, [&](ParameterServer& s, chorus::Communicator&) {
    if (!name) throw UsageError("chorus_ps_add_variable: name is NULL");
    const std::string what = fmt::format("chorus_ps_add_variable '{}'", name);
    s.add_variable(name, data, gradient, count, chorus::api::to_dtype(dtype, what.c_str()));
  });
}

chorus_result_t chorus_ps_start(chorus_ps_t ps, int64_t timeout_ms) {
  return guarded(comm_of(ps), [&] {
    if (!ps) throw UsageError("the parameter-server strategy handle is NULL");
    on_comm(ps->comm,
            [&](chorus::Communicator& c) { ps->strategy->start(deadline_from(c, timeout_ms)); });
  });
}

chorus_result_t chorus_ps_pull(chorus_ps_t ps, int64_t timeout_ms) {
  return on_strategy(ps, [&](ParameterServer& s, chorus::Communicator& c) {
    s.pull(deadline_from(c, timeout_ms));
  });
}

chorus_result_t chorus_ps_push(chorus_ps_t ps, int64_t timeout_ms) {
  return on_strategy(ps, [&](ParameterServer& s, chorus::Communicator& c) {
    s.push(deadline_from(c, timeout_ms));
  });
}

chorus_result_t chorus_ps_finish(chorus_ps_t ps, int64_t timeout_ms) {
  return on_strategy(ps, [&](ParameterServer& s, chorus::Communicator& c) {
    s.finish(deadline_from(c, timeout_ms));
  });
}

chorus_result_t chorus_ps_serve(chorus_ps_t ps, const chorus_optimizer_options_t* optimizer) {
  return on_strategy(ps, [&](ParameterServer& s, chorus::Communicator&) {
    s.serve(chorus::api::optimizer_options(optimizer, "chorus_ps_serve"));
  });
}

chorus_result_t chorus_ps_failed_workers(chorus_ps_t ps, int* ranks, int capacity, int* count) {
  return on_strategy(ps, [&](ParameterServer& s, chorus::Communicator&) {
    check_out(count, "count");
    if (capacity < 0 || (capacity > 0 && !ranks))
      throw UsageError(fmt::format("chorus_ps_failed_workers: capacity {} with ranks {}", capacity,
                                   ranks ? "set" : "NULL"));
    const std::vector<int> failed = s.failed_workers();
    *count = static_cast<int>(failed.size());
    for (int i = 0; i < capacity && i < *count; ++i) ranks[i] = failed[static_cast<std::size_t>(i)];
  });
}

chorus_result_t chorus_ps_save(chorus_ps_t ps, const char* path, int64_t timeout_ms) {
  return on_strategy(ps, [&](ParameterServer& s, chorus::Communicator& c) {
    if (!path) throw UsageError("chorus_ps_save: path is NULL");
    s.save(path, deadline_from(c, timeout_ms));
  });
}

chorus_result_t chorus_ps_restore(chorus_ps_t ps, const char* path, int64_t timeout_ms) {
  return on_strategy(ps, [&](ParameterServer& s, chorus::Communicator& c) {
    if (!path) throw UsageError("chorus_ps_restore: path is NULL");
    s.restore(path, deadline_from(c, timeout_ms));
  });
}

chorus_result_t chorus_ps_destroy(chorus_ps_t ps) {
  return guarded(comm_of(ps), [&] { delete ps; });
}

}  // extern "C"
