#include "collectives/verdict/agree.hpp"

#include <algorithm>
#include <vector>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "collectives/common/shm_pipeline.hpp"

namespace chorus {
namespace {

void agree_over_transport(CollectiveContext& ctx) {
  std::vector<RequestPtr> pending;
  pending.reserve(2 * static_cast<std::size_t>(ctx.size() - 1));
  for (int r = 0; r < ctx.size(); ++r)
    if (r != ctx.rank()) pending.push_back(ctx.await_confirmation(r));
  for (int r = 0; r < ctx.size(); ++r)
    if (r != ctx.rank()) pending.push_back(ctx.confirm(r));
  while (!pending.empty()) {
    try {
      // Not ctx.wait: a gone peer is dropped below before any extension.
      wait_all(ctx.transport, pending, ctx.deadline, ctx.spin, ctx.sig);
      return;
    } catch (const IoError& e) {
      // A gone peer's requests fail, or the wait's own health check finds
      // it gone first (a routed transport asks the control channel while
      // UCX still holds the request): either way it is not waited for.
      // Anything else (a timeout, a peer's failure notice) is the verdict.
      const std::exception_ptr error = std::current_exception();
      std::vector<RequestPtr> left;
      bool dropped = false;
      for (const RequestPtr& q : pending) {
        if (q->done() && !q->completion().failed()) continue;
        if (gone_while_spared(ctx.transport, q->peer(), ctx.tag, ctx.sig)) {
          static spdlog::logger& log = logger("coll");
          log.info("rank {}: {}: rank {} is gone; its verdict is not waited for",
                   ctx.team.member(ctx.rank()), describe(ctx.sig), q->peer());
          dropped = true;
          continue;
        }
        if (q->completion().failed()) std::rethrow_exception(error);
        left.push_back(q);
      }
      pending = std::move(left);
      // What came while the wait reported its timeout (the peers' status
      // comes behind their have on the stream) completes the round.
      if (dropped || pending.empty()) continue;
      // A deadline that passes here, after this rank sent its have, is not
      // yet a verdict: a peer that got that have and every other may finish.
      if (e.code() != CHORUS_ERR_TIMEOUT || !ctx.extend_deadline(pending)) throw;
    }
  }
}

void agree_over_shm(CollectiveContext& ctx) {
  shm::Domain& domain = *ctx.shm;
  const uint64_t step = domain.take_barrier() + 1;
  domain.publish(shm::Counter::arrived, step);
  domain.wait_present(shm::Counter::arrived, step, shm_wait_spec(ctx));
}

}  // namespace

void agree_on_verdict(CollectiveContext& ctx) {
  if (ctx.size() < 2) return;
  if (ctx.shm)
    agree_over_shm(ctx);
  else
    agree_over_transport(ctx);
  ctx.transport.check_call(ctx.tag, ctx.sig);
}

}  // namespace chorus
