// extern "C" entry points of include/chorus.h that finish requests: one
// (chorus_wait, chorus_test) or many at once (chorus_wait_all,
// chorus_test_all, as MPI_Waitall and MPI_Testall). Each catches everything.
//
// The many-request forms record the message of each communicator's first
// failed request (in array order) as that communicator's last error, as if
// the requests had been waited on one by one and only that one had failed.
#include <fmt/format.h>

#include <string>
#include <unordered_map>

#include "base/core/error.hpp"
#include "lib/api/entry.hpp"
#include "lib/api/handles.hpp"

using chorus::Deadline;
using chorus::UsageError;
using chorus::api::check_out;
using chorus::api::guarded;
using chorus::api::lookup;

namespace {

// The communicator a request's errors are recorded for.
chorus_comm_t owner_of(const chorus_request_t* request) {
  return request && *request ? (*request)->owner : nullptr;
}

// A request whose communicator was destroyed: its result if it has one
// (destroy waits for outstanding calls, bounded), else the usage error.
void finish_orphan(chorus_request& r) {
  chorus::Completion& c = r.fused     ? r.fused->completion
                          : r.message ? r.message->request->completion()
                                      : r.work->completion();
  if (!c.done())
    throw UsageError(CHORUS_ERR_INVALID_USAGE,
                     "the request's communicator was destroyed before the request finished");
  c.rethrow_if_failed();
}

void check_timeout(int64_t timeout_ms) {
  if (timeout_ms < 0) throw UsageError("timeout_ms is negative (0 means CHORUS_TIMEOUT)");
}

// Waits for one request and throws its failure. timeout_ms is the caller's
// (0: the operation's own deadline, and 10 s more so that an operation that
// times out reports its own error); `shared`, when not null, is the deadline
// of a wait for many requests, used instead of timeout_ms's (0 included).
// Sets finished once the request's result is final, thrown or not: the
// caller then frees it. A wait that times out leaves it unfinished.
// Inlined: a fused step waits for each of its hundreds of tensors (1000
// already-finished waits, 1 rank: 167 against 184 us a step called).
[[gnu::always_inline]] inline void wait_one(chorus_request& r, int64_t timeout_ms,
                                            const Deadline* shared, const char* caller,
                                            bool& finished) {
  // From here on every result but a timeout frees the request.
  finished = true;
  if (!chorus::api::is_live(r.owner)) {
    // Destroying the communicator finished (or failed) everything it had.
    finish_orphan(r);
    return;
  }
  finished = false;
  if (r.fused && r.fused->completion.done()) {  // no clock read: most waits of a step
    finished = true;
    r.fused->completion.rethrow_if_failed();
    return;
  }
  const bool own_deadline = !shared && timeout_ms == 0;
  const Deadline deadline =
      shared ? *shared
      : own_deadline
          ? Deadline::after(std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::duration<double>(lookup(r.owner).config().timeout_s + 10.0)))
          : Deadline::after_ms(timeout_ms);
  if (r.fused) {
    // Waiting up to CHORUS_TIMEOUT, the thread runs the engine's due cycle
    // itself instead of waking the engine's thread for it (and being woken).
    // A shorter wait wakes the engine's thread for it, so that it returns
    // on time.
    if (chorus::fusion::Engine* engine = r.owner->fusion.made())
      own_deadline ? engine->run_due_cycle() : engine->kick();
    if (!r.fused->completion.wait(deadline, r.spin)) {
      // The engine made the request, so it exists; the tensor may finish
      // just now, and then its name may be gone.
      if (auto name = r.owner->fusion.made()->name_if_pending(*r.fused))
        throw chorus::IoError(
            CHORUS_ERR_TIMEOUT,
            fmt::format("{}: fused allreduce of tensor '{}' not finished after {} ms", caller,
                        *name, timeout_ms));
    }
    finished = true;
    r.fused->completion.rethrow_if_failed();
    return;
  }
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
  if (own_deadline && !r.work->completion().done()) lookup(r.owner).run_queued_until(*r.work);
  if (!r.work->completion().wait(deadline, r.spin))
    throw chorus::IoError(CHORUS_ERR_TIMEOUT,
                          fmt::format("{}: {} not finished after {} ms", caller,
                                      chorus::describe(r.work->signature()), timeout_ms));
  finished = true;
  r.work->completion().rethrow_if_failed();
}

// Whether a request has its result (chorus_test's done). One not done that
// waits for the fusion engine's cycle starts it now if it is due.
bool is_done(chorus_request& r) {
  if (!chorus::api::is_live(r.owner)) return true;
  if (r.fused) {
    if (r.fused->completion.done()) return true;
    if (chorus::fusion::Engine* engine = r.owner->fusion.made()) engine->kick();
    return false;
  }
  if (r.message) return r.message->request->done();
  return r.work->completion().done();
}

void release(chorus_request_t* request) {
  chorus::api::release_request(*request);
  *request = nullptr;
}

// Finishes requests[0, count) with wait_one each (a NULL entry is done and
// succeeded), fills results, frees the finished ones, and returns the first
// failure in array order; each communicator's last error is its first
// failed request's message. deadline: wait_one's shared one (null: each
// request's own, timeout_ms 0).
chorus_result_t wait_each(size_t count, chorus_request_t* requests, int64_t timeout_ms,
                          const Deadline* deadline, chorus_result_t* results, const char* caller) {
  chorus_result_t first = CHORUS_SUCCESS;
  // Each guarded wait sets or clears its communicator's last error; only
  // those with a failure need their first one put back at the end.
  std::unordered_map<chorus_comm_t, std::string> first_errors;
  for (size_t i = 0; i < count; ++i) {
    chorus_result_t result = CHORUS_SUCCESS;
    if (requests[i]) {
      const chorus_comm_t owner = requests[i]->owner;
      bool finished = false;
      result =
          guarded(owner, [&] { wait_one(*requests[i], timeout_ms, deadline, caller, finished); });
      if (finished) release(&requests[i]);
      if (result != CHORUS_SUCCESS) first_errors.try_emplace(owner, chorus::api::last_error(owner));
    }
    if (results) results[i] = result;
    if (first == CHORUS_SUCCESS) first = result;
  }
  for (const auto& [owner, message] : first_errors) chorus::api::set_last_error(owner, message);
  return first;
}

// The arguments of a wait for many: an array, in which no request appears
// twice (its first wait would free it under the second).
void check_many(size_t count, chorus_request_t* requests) {
  if (count > 0) check_out(requests, "requests");
  size_t at = 0;
  for (; at < count; ++at) {
    if (!requests[at]) continue;
    if (requests[at]->listed) break;
    requests[at]->listed = true;
  }
  for (size_t i = 0; i < at; ++i)
    if (requests[i]) requests[i]->listed = false;
  if (at < count)
    throw UsageError(fmt::format("requests[{}] is listed twice (each request at most once)", at));
}

}  // namespace

extern "C" {

chorus_result_t chorus_wait(chorus_request_t* request, int64_t timeout_ms) {
  bool finished = false;
  chorus_result_t result = guarded(owner_of(request), [&] {
    check_out(request, "request");
    check_out(*request, "*request");
    check_timeout(timeout_ms);
    wait_one(**request, timeout_ms, nullptr, "chorus_wait", finished);
  });
  if (finished) release(request);
  return result;
}

chorus_result_t chorus_test(chorus_request_t* request, int* done) {
  bool finished = false;
  chorus_result_t result = guarded(owner_of(request), [&] {
    check_out(request, "request");
    check_out(*request, "*request");
    check_out(done, "done");
    *done = is_done(**request) ? 1 : 0;
    if (!*done) return;
    const Deadline now = Deadline::after_ms(0);
    wait_one(**request, 0, &now, "chorus_test", finished);
  });
  if (finished) release(request);
  return result;
}

chorus_result_t chorus_wait_all(size_t count, chorus_request_t* requests, int64_t timeout_ms,
                                chorus_result_t* results) {
  chorus_result_t refused = guarded(nullptr, [&] {
    check_many(count, requests);
    check_timeout(timeout_ms);
  });
  if (refused != CHORUS_SUCCESS) return refused;
  // 0: each request waits as chorus_wait(request, 0) does, its operation's
  // own deadline deciding; else one deadline for them all.
  const Deadline deadline = Deadline::after_ms(timeout_ms);
  return wait_each(count, requests, timeout_ms, timeout_ms > 0 ? &deadline : nullptr, results,
                   "chorus_wait_all");
}

chorus_result_t chorus_test_all(size_t count, chorus_request_t* requests, int* done,
                                chorus_result_t* results) {
  bool all_done = true;
  chorus_result_t refused = guarded(nullptr, [&] {
    check_many(count, requests);
    check_out(done, "done");
    *done = 0;
    for (size_t i = 0; i < count && all_done; ++i)
      if (requests[i] && !is_done(*requests[i])) all_done = false;
  });
  if (refused != CHORUS_SUCCESS || !all_done) return refused;
  *done = 1;
  const Deadline now = Deadline::after_ms(0);
  return wait_each(count, requests, 0, &now, results, "chorus_test_all");
}

}  // extern "C"
