// Validation of everything the TCP transport reads from the wire.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "transports/tcp/wire.hpp"

using namespace chorus;
using namespace chorus::tcp;

namespace {

std::vector<std::byte> bytes(const FrameHeader& h) {
  std::vector<std::byte> out(sizeof h);
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

CallSignature some_sig() {
  CallSignature s;
  s.seq = 7;
  s.count = 1000;
  s.kind = static_cast<uint8_t>(CollectiveKind::allreduce);
  return s;
}

}  // namespace

TEST_CASE("a well-formed data frame is accepted") {
  auto h = make_frame(FrameType::data, 1, 4000, some_sig());
  CHECK_FALSE(validate_frame(bytes(h)).has_value());
}

TEST_CASE("truncated frame headers are rejected") {
  auto b = bytes(make_frame(FrameType::data, 1, 8, some_sig()));
  for (std::size_t n : {std::size_t(0), std::size_t(1), sizeof(FrameHeader) - 1}) {
    auto error = validate_frame(std::span(b).first(n));
    REQUIRE(error.has_value());
    CHECK_THAT(*error, Catch::Contains("truncated"));
  }
}

TEST_CASE("a wrong magic is rejected") {
  auto h = make_frame(FrameType::data, 1, 8, some_sig());
  h.magic = 0xdeadbeef;
  auto error = validate_frame(bytes(h));
  REQUIRE(error.has_value());
  CHECK_THAT(*error, Catch::Contains("magic"));
}

TEST_CASE("a wrong version or type is rejected") {
  auto h = make_frame(FrameType::data, 1, 8, some_sig());
  h.version = 99;
  CHECK(validate_frame(bytes(h)).has_value());
  h = make_frame(FrameType::data, 1, 8, some_sig());
  h.type = 77;
  auto error = validate_frame(bytes(h));
  REQUIRE(error.has_value());
  CHECK_THAT(*error, Catch::Contains("type"));
}

TEST_CASE("oversized frames are rejected") {
  auto data = make_frame(FrameType::data, 1, kMaxFrameLength + 1, some_sig());
  auto error = validate_frame(bytes(data));
  REQUIRE(error.has_value());
  CHECK_THAT(*error, Catch::Contains("exceeds"));
  CHECK_FALSE(validate_frame(bytes(make_frame(FrameType::data, 1, kMaxFrameLength, some_sig()))));
  CHECK(validate_frame(bytes(make_frame(FrameType::abort, 0, kMaxAbortReason + 1, {}))));
  CHECK_FALSE(validate_frame(bytes(make_frame(FrameType::abort, 0, kMaxAbortReason, {}))));
  CHECK(validate_frame(bytes(make_frame(FrameType::goodbye, 0, 1, {}))));
}

TEST_CASE("ask frames carry nothing; answers carry a result only when finished") {
  CHECK_FALSE(validate_frame(bytes(make_frame(FrameType::ask, 1, 0, some_sig()))));
  CHECK(validate_frame(bytes(make_frame(FrameType::ask, 1, 4, some_sig()))));
  auto answer = make_frame(FrameType::answer, 1, 16, some_sig());
  CHECK_THAT(*validate_frame(bytes(answer)), Catch::Contains("not finished"));
  answer.flags = kAnswerFinished;
  CHECK_FALSE(validate_frame(bytes(answer)));
  answer.length = kMaxAnswerLength + 1;
  CHECK_THAT(*validate_frame(bytes(answer)), Catch::Contains("exceeds"));
  CHECK_FALSE(validate_frame(bytes(make_frame(FrameType::answer, 1, 0, some_sig()))));
}

TEST_CASE("hello validation checks token, ranks and world size") {
  auto check = [](const Hello& h) {
    return validate_hello(std::as_bytes(std::span(&h, 1)), "secret", 1, 4);
  };
  CHECK_FALSE(check(make_hello("secret", 2, 1, 4)));
  auto wrong_token = check(make_hello("guess", 2, 1, 4));
  REQUIRE(wrong_token);
  CHECK_THAT(*wrong_token, Catch::Contains("token"));
  CHECK(check(make_hello("secret", 2, 3, 4)));   // addressed to another rank
  CHECK(check(make_hello("secret", 7, 1, 4)));   // no such rank
  CHECK(check(make_hello("secret", -1, 1, 4)));  // no such rank
  CHECK(check(make_hello("secret", 2, 1, 5)));   // another world
  CHECK(check(make_hello("secretX", 2, 1, 4)));  // token with a suffix
  CHECK(check(make_hello("", 2, 1, 4)));
  Hello bad = make_hello("secret", 2, 1, 4);
  bad.magic = 1;
  CHECK(check(bad));
  auto h = make_hello("secret", 2, 1, 4);
  CHECK(validate_hello(std::as_bytes(std::span(&h, 1)).first(10), "secret", 1, 4));
}
