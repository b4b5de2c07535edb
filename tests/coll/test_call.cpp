// A collective call's arguments are checked in one place (collectives/call.hpp)
// with one set of messages; signatures carry what ranks must agree on.
#include <catch2/catch.hpp>

#include <vector>

#include "base/core/error.hpp"
#include "collectives/allreduce/wire.hpp"
#include "collectives/call.hpp"
#include "collectives/registry.hpp"
#include "collectives/verdict/plan.hpp"
#include "collectives/verdict/recover.hpp"

using namespace chorus;

namespace {

CollectiveCall call(CollectiveKind kind, const void* send, void* recv, std::size_t count,
                    int root = -1) {
  CollectiveCall c;
  c.kind = kind;
  c.send = send;
  c.recv = recv;
  c.count = count;
  c.dtype = DataType::i32;
  c.root = root;
  return c;
}

// The message of the UsageError validate throws ("" when it accepts).
std::string refusal(const CollectiveCall& c, int rank = 0, int size = 2) {
  try {
    validate(c, rank, size);
  } catch (const UsageError& e) {
    CHECK(e.code() == CHORUS_ERR_INVALID_ARGUMENT);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("validate: buffers, overlap and in place per collective", "[call]") {
  std::vector<int32_t> a(64), b(64);
  int32_t* x = a.data();
  int32_t* y = b.data();
  using K = CollectiveKind;
  // Accepted.
  CHECK(refusal(call(K::allreduce, x, y, 8)) == "");
  CHECK(refusal(call(K::allreduce, x, x, 8)) == "");
  CHECK(refusal(call(K::allreduce, nullptr, nullptr, 0)) == "");
  CHECK(refusal(call(K::broadcast, nullptr, x, 8, 1)) == "");
  CHECK(refusal(call(K::reduce, x, nullptr, 8, 1), 0) == "");  // recv unused off the root
  CHECK(refusal(call(K::reduce, x, x, 8, 0), 0) == "");
  CHECK(refusal(call(K::allgather, x, y, 4), 1) == "");
  CHECK(refusal(call(K::allgather, y + 4, y, 4), 1) == "");  // in place
  CHECK(refusal(call(K::gather, x, nullptr, 4, 0), 1) == "");
  CHECK(refusal(call(K::gather, y + 4, y, 4, 1), 1) == "");  // in place at the root
  CHECK(refusal(call(K::scatter, nullptr, x, 4, 0), 1) == "");
  CHECK(refusal(call(K::scatter, y, y + 4, 4, 1), 1) == "");  // in place at the root
  CHECK(refusal(call(K::reduce_scatter, x, x + 4, 4), 1) == "");
  CHECK(refusal(call(K::alltoall, x, y, 4)) == "");
  CHECK(refusal(call(K::barrier, nullptr, nullptr, 0)) == "");
  // Refused, each with its reason.
  CHECK_THAT(refusal(call(K::allreduce, nullptr, y, 8)),
             Catch::Contains("allreduce: sendbuf is NULL"));
  CHECK_THAT(refusal(call(K::allreduce, x, x + 1, 8)),
             Catch::Contains("allreduce: sendbuf and recvbuf overlap"));
  CHECK_THAT(refusal(call(K::broadcast, nullptr, x, 8, 2)),
             Catch::Contains("broadcast: root 2 is not a rank of 2"));
  CHECK_THAT(refusal(call(K::reduce, x, x + 1, 8, 0), 0), Catch::Contains("overlap at the root"));
  CHECK_THAT(refusal(call(K::reduce, x, nullptr, 8, 0), 0), Catch::Contains("recvbuf is NULL"));
  CHECK_THAT(refusal(call(K::gather, x, nullptr, 4, -1)), Catch::Contains("root -1"));
  CHECK_THAT(refusal(call(K::allgather, y + 1, y, 4), 1),
             Catch::Contains("in place means sendbuf == recvbuf + rank * count"));
  CHECK_THAT(refusal(call(K::scatter, y, y + 1, 4, 0), 0),
             Catch::Contains("in place means recvbuf == sendbuf + root * count"));
  CHECK_THAT(refusal(call(K::reduce_scatter, x, x + 1, 4), 1), Catch::Contains("recvbuf overlaps"));
  CHECK_THAT(refusal(call(K::alltoall, x, x + 4, 4)), Catch::Contains("overlap"));
  auto bad_dtype = call(K::allreduce, x, y, 8);
  bad_dtype.dtype = static_cast<DataType>(99);
  CHECK_THAT(refusal(bad_dtype), Catch::Contains("allreduce: unknown dtype 99"));
  auto bad_op = call(K::reduce, x, y, 8, 0);
  bad_op.op = static_cast<ReduceOp>(42);
  CHECK_THAT(refusal(bad_op), Catch::Contains("reduce: unknown reduction op 42"));
  // Sizes that overflow.
  CHECK_THAT(refusal(call(K::allgather, x, y, SIZE_MAX / 2)), Catch::Contains("too many bytes"));
  // Device buffers are for a later build.
  auto device = call(K::allreduce, x, y, 8);
  device.memory = MemoryKind::device;
  try {
    validate(device, 0, 2);
    FAIL("device memory accepted");
  } catch (const UsageError& e) {
    CHECK(e.code() == CHORUS_ERR_UNSUPPORTED);
  }
}

TEST_CASE("validate: variable counts", "[call]") {
  std::vector<int32_t> buf(64), out(64);
  const std::size_t counts[3] = {2, 0, 5};
  auto v = call(CollectiveKind::allgatherv, buf.data(), out.data(), 0);
  v.counts = counts;
  auto shape = validate(v, 2, 3);
  CHECK(shape.total == 7);
  CHECK(shape.offset == 2);
  CHECK(shape.bytes == 28);
  v.send = out.data() + 2;  // in place: this rank's block
  CHECK(refusal(v, 2, 3) == "");
  v.send = out.data() + 1;
  CHECK_THAT(refusal(v, 2, 3), Catch::Contains("allgatherv: sendbuf overlaps recvbuf"));
  v.counts = nullptr;
  CHECK_THAT(refusal(v, 2, 3), Catch::Contains("counts is NULL"));
  auto rs = call(CollectiveKind::reduce_scatterv, buf.data(), buf.data() + 2, 0);
  rs.counts = counts;
  CHECK(refusal(rs, 2, 3) == "");
  rs.recv = nullptr;
  CHECK_THAT(refusal(rs, 2, 3), Catch::Contains("recvbuf is NULL"));
  rs.recv = buf.data() + 2;
  CHECK(refusal(rs, 1, 3) == "");  // rank 1 receives nothing: a NULL-free empty block is fine
}

TEST_CASE("signatures: what every rank must agree on", "[call]") {
  std::vector<int32_t> x(16);
  auto a = call(CollectiveKind::reduce, x.data(), x.data(), 8, 1);
  a.op = ReduceOp::max;
  auto sig = signature_of(a, 2, validate(a, 1, 2));
  CHECK(sig.kind == static_cast<uint8_t>(CollectiveKind::reduce));
  CHECK(sig.count == 8);
  CHECK(sig.root == 1);
  CHECK(sig.op == static_cast<uint8_t>(ReduceOp::max));
  // Non-reducing collectives leave op out; unrooted ones the root.
  auto g = call(CollectiveKind::allgather, x.data(), x.data(), 4);
  g.op = ReduceOp::max;
  auto gsig = signature_of(g, 2, validate(g, 0, 2));
  CHECK(gsig.op == 0);
  CHECK(gsig.root == -1);
  // v-variants: the counts' digest, and the total as the count.
  const std::size_t c1[2] = {3, 4}, c2[2] = {4, 3};
  auto v = call(CollectiveKind::allgatherv, x.data(), x.data() + 8, 0);
  v.counts = c1;
  auto s1 = signature_of(v, 2, validate(v, 0, 2));
  v.counts = c2;
  auto s2 = signature_of(v, 2, validate(v, 0, 2));
  CHECK(s1.count == 7);
  CHECK(s1.layout != 0);
  CHECK_FALSE(s1 == s2);
}

TEST_CASE("compression on the wire: validation, the configured default, the signature",
          "[call][wire]") {
  std::vector<float> f(16);
  std::vector<int32_t> i(16);
  CollectiveCall c = call(CollectiveKind::allreduce, f.data(), f.data(), 16);
  c.dtype = DataType::f32;
  // Refused explicitly: another dtype, another collective, a wire dtype that is no 16-bit float.
  CollectiveCall ints = call(CollectiveKind::allreduce, i.data(), i.data(), 16);
  ints.wire = DataType::bf16;
  CHECK(refusal(ints).find("applies to float32 data only") != std::string::npos);
  CHECK(refusal(ints).find("int32") != std::string::npos);
  CollectiveCall bcast = call(CollectiveKind::broadcast, f.data(), f.data(), 16, 0);
  bcast.dtype = DataType::f32;
  bcast.wire = DataType::f16;
  CHECK(refusal(bcast).find("float32 allreduce only") != std::string::npos);
  CollectiveCall odd = c;
  odd.wire = DataType::i8;
  CHECK(refusal(odd).find("is not bfloat16, float16 or float32") != std::string::npos);
  // f32 (not compressed) is accepted everywhere.
  ints.wire = DataType::f32;
  CHECK(refusal(ints) == "");
  bcast.wire = DataType::f32;
  CHECK(refusal(bcast) == "");

  // The configured default applies to float32 allreduce only, silently;
  // the call's own choice wins; one rank compresses nothing.
  CHECK(wire_dtype_of(c, DataType::bf16, 2) == DataType::bf16);
  CHECK(wire_dtype_of(c, std::nullopt, 2) == std::nullopt);
  CHECK(wire_dtype_of(c, DataType::bf16, 1) == std::nullopt);
  ints.wire.reset();
  CHECK(wire_dtype_of(ints, DataType::bf16, 2) == std::nullopt);
  CHECK(wire_dtype_of(bcast, DataType::bf16, 2) == std::nullopt);
  CollectiveCall off = c;
  off.wire = DataType::f32;
  CHECK(wire_dtype_of(off, DataType::bf16, 2) == std::nullopt);
  CollectiveCall f16 = c;
  f16.wire = DataType::f16;
  CHECK(wire_dtype_of(f16, DataType::bf16, 2) == DataType::f16);

  // Ranks agree on the wire dtype: its signature differs from the plain
  // float32 call's, from a bf16 allreduce's and from the other wire dtype's.
  c.op = ReduceOp::avg;
  const WirePlan bf = plan_wire(c, DataType::bf16, 2);
  const WirePlan hf = plan_wire(c, DataType::f16, 2);
  const CallSignature plain = signature_of(c, 2, validate(c, 0, 2));
  CollectiveCall genuine = c;
  genuine.dtype = DataType::bf16;
  const CallSignature halves = signature_of(genuine, 2, validate(genuine, 0, 2));
  CHECK(bf.sig.dtype == static_cast<uint8_t>(DataType::f32));
  CHECK(bf.sig.op == static_cast<uint8_t>(ReduceOp::avg));
  CHECK_FALSE(bf.sig == plain);
  CHECK_FALSE(bf.sig == halves);
  CHECK_FALSE(bf.sig == hf.sig);
  CHECK(describe(bf.sig).find("float32, avg, bfloat16 on the wire") != std::string::npos);
  // The algorithm runs the wire dtype; avg as sum (the division is in float32).
  CHECK(bf.inner.dtype == DataType::bf16);
  CHECK(bf.inner.op == ReduceOp::sum);
  CHECK(bf.shape.elem == 2);
  CHECK(bf.shape.bytes == 32);
}

TEST_CASE("replicated results: the calls whose result every rank holds, up to the kept size") {
  std::vector<int32_t> in(1024), out(4 * 1024);
  const std::size_t kept = 64 << 10;
  auto result = [&](const CollectiveCall& c, int size = 4, std::size_t max = 64 << 10) {
    return replicated_result(c, validate(c, 0, size), max);
  };
  const auto ar = result(call(CollectiveKind::allreduce, in.data(), out.data(), 1024));
  REQUIRE(ar);
  CHECK(ar->data() == reinterpret_cast<std::byte*>(out.data()));
  CHECK(ar->size() == 4096);
  const auto ag = result(call(CollectiveKind::allgather, in.data(), out.data(), 1024));
  REQUIRE(ag);
  CHECK(ag->size() == 4 * 4096);  // every rank's block
  CHECK(result(call(CollectiveKind::broadcast, nullptr, out.data(), 16, 1))->size() == 64);
  const auto barrier = result(call(CollectiveKind::barrier, nullptr, nullptr, 0));
  REQUIRE(barrier);
  CHECK(barrier->empty());
  // Results that differ by rank cannot be handed over.
  CHECK_FALSE(result(call(CollectiveKind::reduce_scatter, out.data(), in.data(), 1024)));
  CHECK_FALSE(result(call(CollectiveKind::alltoall, in.data(), out.data(), 256)));
  CHECK_FALSE(result(call(CollectiveKind::reduce, in.data(), out.data(), 1024, 0)));
  // Nor a result beyond what is kept (CHORUS_KEEP_RESULT), nor any with 0.
  std::vector<int32_t> big(kept / 4 + 1);
  CHECK(result(call(CollectiveKind::allreduce, big.data(), big.data(), big.size() - 1)));
  CHECK_FALSE(result(call(CollectiveKind::allreduce, big.data(), big.data(), big.size())));
  CHECK_FALSE(result(call(CollectiveKind::barrier, nullptr, nullptr, 0), 4, 0));
}

TEST_CASE("verdict plan: the algorithm's own, a kept result, or the round") {
  std::vector<int32_t> in(1024), out(4 * 1024);
  Config config;  // CHORUS_AGREE 256K, CHORUS_KEEP_RESULT as configured here
  config.keep_result_bytes = 2 << 10;
  auto plan = [&](const CollectiveCall& c, bool one_verdict, int ranks, bool commit = false) {
    const CallShape shape = validate(c, 0, ranks);
    return plan_verdict(config, c, shape, one_verdict, commit, shape.bytes, ranks);
  };
  const auto small_ar = call(CollectiveKind::allreduce, in.data(), out.data(), 16);
  const auto mid_ar = call(CollectiveKind::allreduce, in.data(), out.data(), 1024);  // 4 KiB
  const auto rs = call(CollectiveKind::reduce_scatter, out.data(), in.data(), 16);
  const auto a2a = call(CollectiveKind::alltoall, in.data(), out.data(), 16);
  // A replicated result within the kept size is kept, not agreed on.
  VerdictPlan p = plan(small_ar, false, 3);
  CHECK_FALSE(p.round);
  REQUIRE(p.keep);
  CHECK(p.keep->size() == 64);
  CHECK(std::string(describe(p)) == "kept result");
  // Larger, or a result that differs by rank: the round.
  CHECK(plan(mid_ar, false, 3).round);
  CHECK_FALSE(plan(mid_ar, false, 3).keep);
  CHECK(plan(rs, false, 4).round);
  CHECK(plan(a2a, false, 3).round);
  CHECK(std::string(describe(plan(a2a, false, 3))) == "round");
  // An algorithm that cannot split, or two ranks: nothing.
  for (const auto& c : {small_ar, mid_ar, rs, a2a}) {
    CHECK_FALSE(plan(c, true, 4).round);
    CHECK_FALSE(plan(c, true, 4).keep);
    CHECK_FALSE(plan(c, false, 2).round);
    CHECK_FALSE(plan(c, false, 2).keep);
  }
  CHECK(std::string(describe(plan(rs, true, 4))) == "none");
  // A one verdict at a commit point (a releaser stopped whole) keeps an
  // empty result, whatever the collective and its size: every rank's result
  // is in place before the first release.
  const auto small_bc = call(CollectiveKind::broadcast, out.data(), out.data(), 16, 0);
  const auto big_bc = call(CollectiveKind::broadcast, out.data(), out.data(), 4 * 1024, 0);
  const auto reduce = call(CollectiveKind::reduce, in.data(), out.data(), 1024, 0);
  const auto gather = call(CollectiveKind::gather, in.data(), out.data(), 256, 0);
  const auto scatter = call(CollectiveKind::scatter, out.data(), in.data(), 256, 0);
  for (const auto& c : {small_bc, big_bc, reduce, gather, scatter}) {
    const VerdictPlan committed = plan(c, true, 3, true);
    REQUIRE(committed.keep);
    CHECK(committed.keep->empty());
    CHECK_FALSE(committed.round);
    CHECK_FALSE(plan(c, true, 3).keep);
    CHECK_FALSE(plan(c, true, 2, true).keep);
  }
  config.keep_result_bytes = 0;  // CHORUS_KEEP_RESULT=0: nothing kept, no asks
  CHECK_FALSE(plan(reduce, true, 3, true).keep);
  config.keep_result_bytes = 2 << 10;
  // From CHORUS_AGREE's size every call takes the round, on its own or not.
  std::vector<int32_t> big((256 << 10) / 4);
  const auto big_ar = call(CollectiveKind::allreduce, big.data(), big.data(), big.size());
  CHECK(plan(big_ar, true, 2).round);
  CHECK_FALSE(plan(big_ar, true, 2).keep);
  // CHORUS_AGREE=0: no round at all, but results are still kept.
  config.agree_min_bytes = Config::kAgreeNever;
  CHECK_FALSE(plan(big_ar, false, 4).round);
  CHECK_FALSE(plan(rs, false, 4).round);
  CHECK(plan(small_ar, false, 4).keep);
  // CHORUS_AGREE=1: every call, a kept one too.
  config.agree_min_bytes = 0;
  CHECK(plan(small_ar, false, 4).round);
  CHECK_FALSE(plan(small_ar, false, 4).keep);
}

TEST_CASE("verdict plan: which algorithms give one verdict on their own") {
  // Shared memory keeps a dead rank's posted part; the rooted transport
  // algorithms end with the root's confirmation. The others can split.
  for (const AlgorithmSpec* spec : algorithms()) {
    const bool shm = spec->refusal == needs_shared_memory;
    const bool rooted =
        spec->kind == CollectiveKind::broadcast || spec->kind == CollectiveKind::reduce ||
        spec->kind == CollectiveKind::gather || spec->kind == CollectiveKind::scatter;
    const bool hierarchical = spec->name.find("hierarch") != std::string_view::npos;
    INFO(collective_name(spec->kind) << " " << spec->name);
    CHECK(spec->one_verdict == (shm || (rooted && !hierarchical)));
  }
}
