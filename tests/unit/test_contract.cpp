// Call signatures: the digest that shared-memory mail headers carry tells
// every compared field apart and ignores the reserved bytes, as operator== does.
#include <catch2/catch.hpp>

#include <functional>
#include <vector>

#include "base/core/contract.hpp"

using namespace chorus;

TEST_CASE("signature digest: equal for equal calls, different for each differing field",
          "[contract]") {
  CallSignature base;
  base.seq = 12;
  base.count = 1000;
  base.root = -1;
  base.kind = static_cast<uint8_t>(CollectiveKind::allreduce);
  base.dtype = 7;
  base.op = 1;
  base.algo = 3;
  CallSignature same = base;
  same.reserved[2] = 9;  // not compared by operator==, so not digested either
  REQUIRE(same == base);
  CHECK(signature_digest(same) == signature_digest(base));

  std::vector<std::function<void(CallSignature&)>> changes = {
      [](CallSignature& s) { s.seq += 1; },
      [](CallSignature& s) { s.count += 1; },
      [](CallSignature& s) { s.root = 0; },
      [](CallSignature& s) { s.kind = static_cast<uint8_t>(CollectiveKind::barrier); },
      [](CallSignature& s) { s.dtype += 1; },
      [](CallSignature& s) { s.op += 1; },
      [](CallSignature& s) { s.algo += 1; },
  };
  for (std::size_t i = 0; i < changes.size(); ++i) {
    CallSignature other = base;
    changes[i](other);
    INFO("field change " << i);
    REQUIRE_FALSE(other == base);
    CHECK(signature_digest(other) != signature_digest(base));
  }
}
