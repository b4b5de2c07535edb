// The replica check's verdict (lib/strategy/replica_check.hpp) on gathered
// digests made up here: which variable and rank it names, in what words,
// and the digests it is built from.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "lib/strategy/replica_check.hpp"

using chorus::DataType;
using chorus::strategy::describe_divergence;
using chorus::strategy::digest_bytes;
using chorus::strategy::digest_layout;
using chorus::strategy::first_divergence;
using chorus::strategy::VariableLayout;

TEST_CASE("replica check: digests", "[replicas]") {
  // xxHash64's published value for no input, seed 0.
  CHECK(digest_bytes("", 0) == 0xEF46DB3751D8E999ull);
  const float a[3] = {1, 2, 3};
  float b[3] = {1, 2, 3};
  CHECK(digest_bytes(a, sizeof a) == digest_bytes(b, sizeof b));
  b[2] = std::nextafter(3.0f, 4.0f);  // one bit
  CHECK(digest_bytes(a, sizeof a) != digest_bytes(b, sizeof b));

  const std::vector<VariableLayout> layout{{"w", 10, DataType::f32}, {"b", 2, DataType::f32}};
  const uint64_t base = digest_layout(layout);
  CHECK(digest_layout(layout) == base);
  CHECK(digest_layout(std::vector<VariableLayout>{layout[1], layout[0]}) != base);  // order
  CHECK(digest_layout(std::vector<VariableLayout>{{"w", 10, DataType::f32},
                                                  {"c", 2, DataType::f32}}) != base);  // a name
  CHECK(digest_layout(std::vector<VariableLayout>{{"w", 10, DataType::f32},
                                                  {"b", 3, DataType::f32}}) != base);  // a count
  CHECK(digest_layout(std::vector<VariableLayout>{{"w", 10, DataType::f32},
                                                  {"b", 2, DataType::f64}}) != base);  // a dtype
  // Names that run together differently.
  CHECK(digest_layout(
            std::vector<VariableLayout>{{"ab", 1, DataType::f32}, {"c", 1, DataType::f32}}) !=
        digest_layout(
            std::vector<VariableLayout>{{"a", 1, DataType::f32}, {"bc", 1, DataType::f32}}));
}

TEST_CASE("replica check: the first variable, the lowest rank", "[replicas]") {
  // 4 ranks x (layout + 3 variables).
  const std::vector<uint64_t> same{7, 10, 20, 30};
  auto gathered = [&](std::vector<std::vector<uint64_t>> ranks) {
    std::vector<uint64_t> out;
    for (auto& r : ranks) out.insert(out.end(), r.begin(), r.end());
    return out;
  };
  CHECK_FALSE(first_divergence(gathered({same, same, same, same}), 4));

  // Rank 3 differs on variable 0, rank 1 on variable 2: variable 0 first.
  auto d = first_divergence(gathered({same, {7, 10, 20, 31}, same, {7, 11, 20, 30}}), 4);
  REQUIRE(d);
  CHECK(d->variable == 0);
  CHECK(d->rank == 3);
  CHECK(d->theirs == 11);
  CHECK(d->reference == 10);

  // Ranks 2 and 3 differ on variable 1: the lowest.
  d = first_divergence(gathered({same, same, {7, 10, 21, 30}, {7, 10, 22, 30}}), 4);
  REQUIRE(d);
  CHECK(d->variable == 1);
  CHECK(d->rank == 2);

  // A registration that differs comes before any variable.
  d = first_divergence(gathered({same, {7, 11, 20, 30}, {8, 10, 20, 30}, same}), 4);
  REQUIRE(d);
  CHECK(d->variable == -1);
  CHECK(d->rank == 2);
}

TEST_CASE("replica check: the message", "[replicas]") {
  const std::vector<std::string> names{"fc1.weight", "fc1.bias"};
  chorus::strategy::Divergence d;
  d.variable = 1;
  d.rank = 2;
  d.theirs = 0xabc;
  d.reference = 0x123;
  CHECK(describe_divergence(d, names, 12) ==
        "replicas diverged at step 12: variable 'fc1.bias' on rank 2 differs from rank 0 (digest "
        "0x0000000000000abc vs 0x0000000000000123)");
  d.variable = -1;
  CHECK(describe_divergence(d, names, 3)
            .find("at step 3: rank 2 registered other variables "
                  "than rank 0") != std::string::npos);
}
