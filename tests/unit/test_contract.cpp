// Call signatures: the digest that shared-memory mail headers carry tells
// every field apart, as operator== does, and equal calls digest equally.
#include <catch2/catch.hpp>

#include <functional>
#include <vector>

#include "base/core/contract.hpp"
#include "base/core/dtype.hpp"

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
      [](CallSignature& s) { s.layout = 0x1234; },
  };
  for (std::size_t i = 0; i < changes.size(); ++i) {
    CallSignature other = base;
    changes[i](other);
    INFO("field change " << i);
    REQUIRE_FALSE(other == base);
    CHECK(signature_digest(other) != signature_digest(base));
  }
}

TEST_CASE("signatures describe themselves; algorithms by name once a namer is set", "[contract]") {
  CallSignature s;
  s.seq = 4;
  s.count = 10;
  s.kind = static_cast<uint8_t>(CollectiveKind::reduce);
  s.dtype = static_cast<uint8_t>(DataType::f32);
  s.op = static_cast<uint8_t>(ReduceOp::max);
  s.root = 2;
  s.algo = 5;
  set_algorithm_namer(nullptr);
  CHECK(describe(s) == "reduce #4 (count 10, float32, max, root 2, algorithm 5)");
  set_algorithm_namer([](uint8_t a) -> std::string_view { return a == 5 ? "tree" : "?"; });
  CHECK(describe(s) == "reduce #4 (count 10, float32, max, root 2, algorithm tree)");
  set_algorithm_namer(nullptr);
  s.kind = static_cast<uint8_t>(CollectiveKind::send);
  s.algo = 0;
  s.layout = 77;
  CHECK(describe(s) == "send #4 (count 10, float32, to rank 2, tag 77)");
  s.kind = static_cast<uint8_t>(CollectiveKind::allgatherv);
  s.root = -1;
  s.layout = 0xabc;
  CHECK(describe(s) == "allgatherv #4 (count 10, float32, counts digest 00000abc)");
}
