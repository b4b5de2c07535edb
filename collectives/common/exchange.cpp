#include "collectives/common/exchange.hpp"

#include <array>
#include <vector>

#include "collectives/common/ring_pipeline.hpp"

namespace chorus {

namespace {
constexpr std::size_t kRecvWindow = 4;  // receives posted ahead
}

void run_exchange(CollectiveContext& ctx, const Exchange& x) {
  const std::size_t e = x.elem_size;
  const std::size_t seg_elems = patterns::segment_elems(ctx.segment_bytes, e);
  const std::size_t nin = patterns::segment_count(x.in.count, seg_elems);
  const std::size_t nout = patterns::segment_count(x.out.count, seg_elems);
  auto incoming = [&](std::size_t k) { return patterns::segment(x.in, seg_elems, k); };
  auto landing = [&](patterns::Range sg) { return x.in_base + (sg.offset - x.in.offset) * e; };

  std::array<RequestPtr, kRecvWindow> recvs;
  std::size_t posted = 0;
  auto post = [&] {
    const patterns::Range sg = incoming(posted);
    recvs[posted % kRecvWindow] =
        x.recv_placed ? x.recv_placed(sg) : ctx.recv(x.peer, {landing(sg), sg.count * e});
    ++posted;
  };
  while (posted < nin && posted < kRecvWindow) post();
  std::vector<RequestPtr> sends;
  sends.reserve(nout);
  for (std::size_t k = 0; k < nout; ++k) {
    const patterns::Range sg = patterns::segment(x.out, seg_elems, k);
    sends.push_back(x.send_placed ? x.send_placed(sg)
                                  : ctx.send(x.peer, {x.out_base + sg.offset * e, sg.count * e}));
  }
  std::size_t checked = 0;  // sends[0, checked) are known to have succeeded
  for (std::size_t k = 0; k < nin; ++k) {
    RequestPtr& r = recvs[k % kRecvWindow];
    wait_request(ctx, r);
    r.reset();
    if (posted < nin) post();
    const patterns::Range sg = incoming(k);
    if (x.landed) x.landed(sg, x.recv_placed ? nullptr : landing(sg));
    while (checked < sends.size() && sends[checked]->done())
      sends[checked++]->completion().rethrow_if_failed();
  }
  ctx.wait(std::span<const RequestPtr>(sends).subspan(checked));
}

}  // namespace chorus
