#include "collectives/context.hpp"

#include <algorithm>
#include <vector>

#include "base/core/error.hpp"
#include "base/core/log.hpp"

namespace chorus {

void CollectiveContext::wait(std::span<const RequestPtr> rs) {
  while (true) {
    try {
      wait_all(transport, rs, deadline, spin, sig);
      return;
    } catch (const IoError& e) {
      // A request may fail with a timeout's code too (a peer's notice):
      // only this wait's own deadline is asked about.
      if (e.code() != CHORUS_ERR_TIMEOUT || !deadline.expired() || !extend_deadline(rs)) throw;
    }
  }
}

bool CollectiveContext::extend_deadline(std::span<const RequestPtr> pending) {
  std::vector<int> waited_on;
  for (const RequestPtr& r : pending) {
    if (r && r->completion().failed()) return false;  // that failure is the verdict
    if (r && !r->done() &&
        std::find(waited_on.begin(), waited_on.end(), r->peer()) == waited_on.end())
      waited_on.push_back(r->peer());
  }
  // What came while the wait reported its timeout completes it: wait again.
  if (waited_on.empty()) return true;
  if (extensions == kMaxExtensions) return false;
  if (!transport.parts_done(tag, sig, waited_on)) return false;
  ++extensions;
  static spdlog::logger& log = logger("coll");
  log.warn(
      "rank {}: {}: the deadline passed, but every peer still waited on has done its part: "
      "waiting {} s more",
      team.member(rank()), describe(sig), kExtension.count());
  deadline = Deadline::after(kExtension);
  return true;
}

}  // namespace chorus
