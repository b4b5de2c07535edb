// The fusion engine's pure parts (lib/fusion/negotiation.hpp): the report
// encoding, the agreement over every rank's report, the known-name table and
// the bucket plan.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/core/error.hpp"
#include "lib/fusion/negotiation.hpp"

using namespace chorus;
using namespace chorus::fusion;

namespace {

TensorSpec spec(std::string name, uint64_t count, DataType dtype = DataType::f32,
                ReduceOp op = ReduceOp::sum) {
  return {std::move(name), count, dtype, op};
}

std::vector<std::string> names(const std::vector<TensorSpec>& specs) {
  std::vector<std::string> out;
  for (auto& s : specs) out.push_back(s.name);
  return out;
}

}  // namespace

TEST_CASE("fusion report: encode and decode round trip", "[fusion]") {
  RankReport report{(1u << kHasNew) | (1u << kShutdown),
                    {spec("a", 1), spec("", 0, DataType::u8, ReduceOp::max),
                     spec(std::string(300, 'x'), 1ull << 40, DataType::bf16, ReduceOp::avg)}};
  const auto bytes = encode_report(report);
  const RankReport back = decode_report(bytes);
  CHECK(back.flags == report.flags);
  CHECK(back.has(kHasNew));
  CHECK_FALSE(back.has(kStallCheck));
  REQUIRE(back.pending.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(back.pending[i].name == report.pending[i].name);
    CHECK(back.pending[i].same_shape(report.pending[i]));
  }
}

TEST_CASE("fusion report: bytes it cannot have made are refused", "[fusion]") {
  const auto good = encode_report({0, {spec("weight", 10)}});
  // Every truncation, a byte too many, a bad dtype, a count of tensors that
  // cannot fit: an InvariantError, never a crash.
  for (std::size_t cut = 0; cut < good.size(); ++cut)
    CHECK_THROWS_AS(decode_report({good.data(), cut}), InvariantError);
  auto longer = good;
  longer.push_back(0);
  CHECK_THROWS_AS(decode_report(longer), InvariantError);
  auto bad_dtype = good;
  bad_dtype[8 + 8] = 200;
  CHECK_THROWS_AS(decode_report(bad_dtype), InvariantError);
  auto many = good;
  many[4] = 0xff;
  many[5] = 0xff;
  CHECK_THROWS_AS(decode_report(many), InvariantError);
}

TEST_CASE("fusion agreement: ready where every rank has it, in rank 0's order", "[fusion]") {
  std::vector<RankReport> reports = {
      {0, {spec("c", 3), spec("a", 1), spec("only0", 5)}},
      {0, {spec("a", 1), spec("b", 2), spec("c", 3)}},
      {0, {spec("b", 2), spec("c", 3), spec("a", 1)}},
  };
  const Agreement agreement = agree(reports);
  CHECK(names(agreement.ready) == std::vector<std::string>{"c", "a"});
  CHECK_FALSE(agreement.mismatch);
  REQUIRE(agreement.missing.size() == 2);
  CHECK(agreement.missing[0].spec.name == "only0");
  CHECK(agreement.missing[0].have == std::vector<int>{0});
  CHECK(agreement.missing[0].lack == std::vector<int>{1, 2});
  CHECK(agreement.missing[1].spec.name == "b");
  CHECK(agreement.missing[1].have == std::vector<int>{1, 2});
  CHECK(agreement.missing[1].lack == std::vector<int>{0});
  CHECK(describe(agreement.missing[1]) ==
        "tensor 'b' (count 2, float32, sum) was submitted by ranks 1, 2 and not by rank 0");
}

TEST_CASE("fusion agreement: one name with two specs is a mismatch naming both ranks", "[fusion]") {
  for (auto other :
       {spec("w", 11), spec("w", 10, DataType::f64), spec("w", 10, DataType::f32, ReduceOp::max)}) {
    std::vector<RankReport> reports = {{0, {spec("w", 10)}}, {0, {spec("x", 1)}}, {0, {other}}};
    const Agreement agreement = agree(reports);
    REQUIRE(agreement.mismatch);
    CHECK(agreement.mismatch->first_rank == 0);
    CHECK(agreement.mismatch->other_rank == 2);
    const std::string text = describe(*agreement.mismatch);
    CHECK(text.find("tensor 'w'") != std::string::npos);
    CHECK(text.find("on rank 0") != std::string::npos);
    CHECK(text.find("on rank 2") != std::string::npos);
  }
}

TEST_CASE("fusion known table: ids in order of addition, bounded", "[fusion]") {
  KnownTable known(2);
  CHECK(known.add(spec("a", 1)) == 0u);
  CHECK(known.add(spec("b", 2)) == 1u);
  CHECK_FALSE(known.add(spec("c", 3)));  // full: c negotiates by name
  CHECK(known.size() == 2);
  CHECK(known.at(1).name == "b");
  CHECK(known.at(1).count == 2);
  known.update(0, spec("a", 7));
  CHECK(known.at(0).count == 7);
  CHECK(known.at(0).name == "a");
}

TEST_CASE("fusion buckets: grouped by dtype and op, at most fusion_bytes each", "[fusion]") {
  std::vector<TensorSpec> ready = {
      spec("f1", 100),                                // 400 B
      spec("d1", 10, DataType::f64),                  // 80 B
      spec("f2", 100),                                // 400 B
      spec("m1", 100, DataType::f32, ReduceOp::max),  // 400 B
      spec("f3", 100),                                // 400 B
      spec("big", 1000),                              // 4000 B: alone
      spec("f4", 10),                                 // 40 B
  };
  const auto buckets = plan_buckets(ready, 1000);
  // Group order: f32 sum (first seen), f64 sum, f32 max.
  CHECK(names(ready) == std::vector<std::string>{"f1", "f2", "f3", "big", "f4", "d1", "m1"});
  REQUIRE(buckets.size() == 6);
  CHECK((buckets[0].first == 0 && buckets[0].last == 2 && buckets[0].bytes == 800));
  CHECK((buckets[1].first == 2 && buckets[1].last == 3));  // f3 would pass 1000 B
  CHECK((buckets[2].first == 3 && buckets[2].last == 4 && buckets[2].bytes == 4000));
  CHECK((buckets[3].first == 4 && buckets[3].last == 5));  // f4 does not join big
  CHECK((buckets[4].first == 5 && buckets[4].last == 6));  // d1: f64
  CHECK((buckets[5].first == 6 && buckets[5].last == 7));  // m1: max, not fused with sums
}

TEST_CASE("fusion buckets: tensors of alone_bytes or more go alone", "[fusion]") {
  std::vector<TensorSpec> ready = {spec("a", 10), spec("b", 10), spec("big", 100),
                                   spec("c", 10), spec("d", 10), spec("e", 10)};
  // Alone from 400 B: big (400 B) alone; the 40 B ones fuse up to 100 B.
  const auto buckets = plan_buckets(ready, 100, 400);
  REQUIRE(buckets.size() == 4);
  CHECK((buckets[0].first == 0 && buckets[0].last == 2 && buckets[0].bytes == 80));
  CHECK((buckets[1].first == 2 && buckets[1].last == 3 && buckets[1].bytes == 400));
  CHECK((buckets[2].first == 3 && buckets[2].last == 5 && buckets[2].bytes == 80));
  CHECK((buckets[3].first == 5 && buckets[3].last == 6));
  // A bucket whose total passes alone_bytes still takes more small tensors.
  std::vector<TensorSpec> small(10, spec("s", 25));  // 100 B each
  const auto fused = plan_buckets(small, 1000, 150);
  REQUIRE(fused.size() == 1);
  CHECK(fused[0].bytes == 1000);
}

TEST_CASE("fusion buckets: a run of tensors that follow each other takes any size", "[fusion]") {
  // follows: the tensor lies right after the one before it on every rank.
  struct Item {
    TensorSpec spec;
    bool follows;
  };
  const auto plan = [](std::vector<Item>& items, std::size_t fusion_bytes,
                       std::size_t alone_bytes) {
    return plan_buckets(
        items, fusion_bytes, alone_bytes, [](const Item& i) -> const TensorSpec& { return i.spec; },
        [](const Item& i) { return i.follows; });
  };
  // 400 B alone; fused up to 2000 B.
  std::vector<Item> items = {
      {spec("a", 10), false},                // 40 B
      {spec("b", 100), true},                // 400 B: big, but extends the run a
      {spec("c", 10), true},                 // small, extends the run
      {spec("d", 100), false},               // big, does not follow: alone
      {spec("e", 10), false},                // small after a big one: a new bucket
      {spec("f", 10), false},                // small, joins e (copied somewhere)
      {spec("g", 100), true},                // big, follows f, but e-f is no run: alone
      {spec("h", 200), true},                // big, extends the run g
      {spec("i", 300), true},                // would pass 2000 B: a new bucket
      {spec("j", 10, DataType::f64), true},  // another group: never joins
  };
  const auto buckets = plan(items, 2000, 400);
  REQUIRE(buckets.size() == 6);
  CHECK((buckets[0].first == 0 && buckets[0].last == 3 && buckets[0].bytes == 480));
  CHECK((buckets[1].first == 3 && buckets[1].last == 4));
  CHECK((buckets[2].first == 4 && buckets[2].last == 6 && buckets[2].bytes == 80));
  CHECK((buckets[3].first == 6 && buckets[3].last == 8 && buckets[3].bytes == 1200));
  CHECK((buckets[4].first == 8 && buckets[4].last == 9 && buckets[4].bytes == 1200));
  CHECK((buckets[5].first == 9 && buckets[5].last == 10));
  // Where nothing follows, the plan is the one without runs.
  std::vector<Item> apart = items;
  std::vector<TensorSpec> specs;
  for (auto& i : apart) {
    i.follows = false;
    specs.push_back(i.spec);
  }
  const auto without = plan(apart, 2000, 400);
  const auto reference = plan_buckets(specs, 2000, 400);
  REQUIRE(without.size() == reference.size());
  for (std::size_t b = 0; b < without.size(); ++b)
    CHECK((without[b].first == reference[b].first && without[b].last == reference[b].last));
}
