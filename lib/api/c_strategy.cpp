// extern "C" entry points of the mirrored strategy (include/chorus.h): a
// handle over chorus::strategy::Mirrored (lib/strategy/mirrored.hpp), which
// reaches the communicator and its fusion engine slot through comm's handle.
// Every entry point first checks that comm is live: the strategy holds
// references into it.
#include <fmt/format.h>

#include <cstddef>
#include <memory>
#include <string>

#include "lib/api/entry.hpp"
#include "lib/api/handles.hpp"
#include "lib/api/optimizer_options.hpp"
#include "lib/strategy/mirrored.hpp"

using chorus::UsageError;
using chorus::api::check_out;
using chorus::api::deadline_from;
using chorus::api::guarded;
using chorus::api::on_comm;

struct chorus_mirrored {
  chorus_comm_t comm;
  std::unique_ptr<chorus::strategy::Mirrored> strategy;
};

namespace {

chorus_comm_t comm_of(chorus_mirrored_t m) {
  return m ? m->comm : nullptr;
}

// Runs body(strategy, communicator) for a live strategy; a refused argument
// fails the communicator on every rank (on_comm).
template <typename Body>
chorus_result_t on_strategy(chorus_mirrored_t m, Body&& body) {
  return guarded(comm_of(m), [&] {
    if (!m) throw UsageError("the mirrored strategy handle is NULL");
    on_comm(m->comm, [&](chorus::Communicator& c) { body(*m->strategy, c); });
  });
}

chorus::strategy::MirroredOptions mirrored_options(const chorus_mirrored_options_t* options,
                                                   const chorus::Config& config) {
  chorus::strategy::MirroredOptions o;
  o.check_every = config.check_replicas;
  if (!options) return o;
  if (options->size < sizeof(chorus_mirrored_options_t))
    throw UsageError(
        fmt::format("chorus_mirrored_create: options->size {} (expected {}); start it with "
                    "CHORUS_MIRRORED_OPTIONS_INITIALIZER",
                    options->size, sizeof(chorus_mirrored_options_t)));
  if (options->check_replicas < -1)
    throw UsageError(fmt::format(
        "chorus_mirrored_create: check_replicas {} (a step count, 0 for never, or -1 for "
        "CHORUS_CHECK_REPLICAS)",
        options->check_replicas));
  o.root = options->root;
  o.use_fusion = options->use_fusion != 0;
  if (options->check_replicas >= 0) o.check_every = options->check_replicas;
  return o;
}

}  // namespace

extern "C" {

chorus_result_t chorus_mirrored_create(chorus_comm_t comm, const chorus_mirrored_options_t* options,
                                       chorus_mirrored_t* out) {
  return guarded(comm, [&] {
    check_out(out, "out");
    *out = nullptr;
    on_comm(comm, [&](chorus::Communicator& c) {
      auto strategy = std::make_unique<chorus::strategy::Mirrored>(
          c, comm->fusion, mirrored_options(options, c.config()));
      *out = new chorus_mirrored{comm, std::move(strategy)};
    });
  });
}

chorus_result_t chorus_mirrored_add_variable(chorus_mirrored_t m, const char* name, void* variable,
                                             void* gradient, size_t count, chorus_dtype_t dtype) {
  return on_strategy(m, [&](chorus::strategy::Mirrored& s, chorus::Communicator&) {
    if (!name) throw UsageError("chorus_mirrored_add_variable: name is NULL");
    const std::string what = fmt::format("chorus_mirrored_add_variable '{}'", name);
    s.add_variable(name, variable, gradient, count, chorus::api::to_dtype(dtype, what.c_str()));
  });
}

chorus_result_t chorus_mirrored_broadcast_variables(chorus_mirrored_t m, int64_t timeout_ms) {
  return on_strategy(m, [&](chorus::strategy::Mirrored& s, chorus::Communicator& c) {
    s.broadcast_variables(deadline_from(c, timeout_ms));
  });
}

chorus_result_t chorus_mirrored_gradient_ready(chorus_mirrored_t m, const char* name) {
  return on_strategy(m, [&](chorus::strategy::Mirrored& s, chorus::Communicator&) {
    if (!name) throw UsageError("chorus_mirrored_gradient_ready: name is NULL");
    s.gradient_ready(name);
  });
}

chorus_result_t chorus_mirrored_reduce_gradients(chorus_mirrored_t m, int64_t timeout_ms) {
  return on_strategy(m, [&](chorus::strategy::Mirrored& s, chorus::Communicator& c) {
    s.reduce_gradients(deadline_from(c, timeout_ms));
  });
}

chorus_result_t chorus_mirrored_apply(chorus_mirrored_t m,
                                      const chorus_optimizer_options_t* optimizer) {
  return on_strategy(m, [&](chorus::strategy::Mirrored& s, chorus::Communicator&) {
    s.apply(chorus::api::optimizer_options(optimizer, "chorus_mirrored_apply"));
  });
}

chorus_result_t chorus_mirrored_end_step(chorus_mirrored_t m, int64_t timeout_ms) {
  return on_strategy(m, [&](chorus::strategy::Mirrored& s, chorus::Communicator& c) {
    s.end_step(deadline_from(c, timeout_ms));
  });
}

chorus_result_t chorus_mirrored_check_replicas(chorus_mirrored_t m, int64_t timeout_ms) {
  return on_strategy(m, [&](chorus::strategy::Mirrored& s, chorus::Communicator& c) {
    s.check_replicas(deadline_from(c, timeout_ms));
  });
}

chorus_result_t chorus_mirrored_destroy(chorus_mirrored_t m) {
  return guarded(comm_of(m), [&] {
    if (!m) return;
    std::unique_ptr<chorus_mirrored> owned(m);
    // A destroyed communicator finished or failed every reduction (and the
    // strategy's references into it are gone): then there is nothing to
    // wait for.
    if (chorus::api::is_live(owned->comm))
      owned->strategy->drain(chorus::api::lookup(owned->comm).default_deadline());
  });
}

}  // extern "C"
