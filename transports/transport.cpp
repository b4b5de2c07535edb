#include "transports/transport.hpp"

#include <fmt/format.h>

#include "lib/core/error.hpp"

namespace chorus {

namespace {

bool all_done(std::span<const RequestPtr> requests) {
  for (const auto& r : requests)
    if (r && !r->done()) return false;
  return true;
}

template <typename Describe>
void wait_all_impl(Transport& transport, std::span<const RequestPtr> requests,
                   const Deadline& deadline, int spin_us, Describe&& describe_call) {
  // Spin on all requests at once, driving the transport; then let the
  // transport put this thread to sleep until they are done.
  if (!all_done(requests)) {
    transport.spin_begin();
    auto spin_end = Clock::now() + std::chrono::microseconds(spin_us);
    unsigned round = 0;
    while (!all_done(requests) && Clock::now() < spin_end) {
      if (transport.poll()) round = 0;
      spin_pause(round++);
    }
    for (const auto& request : requests) {
      while (request && !request->done() && !deadline.expired())
        transport.wait_for_progress(
            *request, std::min<std::chrono::nanoseconds>(deadline.remaining(),
                                                         std::chrono::milliseconds(10)));
    }
    transport.spin_end(true);
  }
  for (const auto& request : requests) {
    if (!request) continue;
    if (!request->done()) {
      std::string pending;
      for (const auto& r : requests) {
        if (!r || r->done()) continue;
        if (!pending.empty()) pending += ", ";
        pending += fmt::format("{} rank {}", r->is_send() ? "send to" : "receive from", r->peer());
      }
      throw IoError(CHORUS_ERR_TIMEOUT, fmt::format("rank {}: {} timed out waiting on {}",
                                                    transport.rank(), describe_call(), pending));
    }
    request->completion().rethrow_if_failed();
  }
}

}  // namespace

void wait_all(Transport& transport, std::span<const RequestPtr> requests, const Deadline& deadline,
              int spin_us, const CallSignature& call) {
  wait_all_impl(transport, requests, deadline, spin_us, [&] { return describe(call); });
}

void wait_all(Transport& transport, std::span<const RequestPtr> requests, const Deadline& deadline,
              int spin_us, std::string_view what) {
  wait_all_impl(transport, requests, deadline, spin_us, [&] { return std::string(what); });
}

void wait_one(Transport& transport, const RequestPtr& request, const Deadline& deadline,
              int spin_us, const CallSignature& call) {
  wait_all(transport, std::span<const RequestPtr>(&request, 1), deadline, spin_us, call);
}

void wait_one(Transport& transport, const RequestPtr& request, const Deadline& deadline,
              int spin_us, std::string_view what) {
  wait_all(transport, std::span<const RequestPtr>(&request, 1), deadline, spin_us, what);
}

}  // namespace chorus
