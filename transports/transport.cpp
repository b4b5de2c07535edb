#include "transports/transport.hpp"

#include <fmt/format.h>

#include "lib/core/error.hpp"

namespace chorus {

void wait_all(Transport& transport, std::span<const RequestPtr> requests, const Deadline& deadline,
              int spin_us, std::string_view what) {
  auto poll = [&transport] { return transport.poll(); };
  for (const auto& request : requests) {
    if (!request) continue;
    if (!request->completion().wait(deadline, spin_us, poll)) {
      std::string pending;
      for (const auto& r : requests) {
        if (!r || r->done()) continue;
        if (!pending.empty()) pending += ", ";
        pending += fmt::format("{} rank {}", r->is_send() ? "send to" : "receive from", r->peer());
      }
      throw IoError(CHORUS_ERR_TIMEOUT, fmt::format("rank {}: {} timed out waiting on {}",
                                                    transport.rank(), what, pending));
    }
    request->completion().rethrow_if_failed();
  }
}

void wait_one(Transport& transport, const RequestPtr& request, const Deadline& deadline,
              int spin_us, std::string_view what) {
  wait_all(transport, std::span<const RequestPtr>(&request, 1), deadline, spin_us, what);
}

}  // namespace chorus
