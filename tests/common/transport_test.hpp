// What the transport tests (tests/tcp, tests/ucx) share: building call
// signatures, waiting on a request for its result code, waiting for what
// arrives in the background, and the checks that a dead peer's death spared
// the call in progress, which every transport must pass alike. Include after
// catch.hpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/core/error.hpp"
#include "transports/transport.hpp"

namespace chorus::test {

// n bytes that differ from one seed to another and along the buffer, so that
// a byte moved to the wrong place or taken from the wrong message shows.
inline std::vector<std::byte> pattern(std::size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed * 7) & 0xff);
  return v;
}

inline CallSignature sig_of(uint64_t seq, uint64_t count) {
  CallSignature s;
  s.seq = seq;
  s.count = count;
  s.kind = static_cast<uint8_t>(CollectiveKind::allreduce);
  return s;
}

// A transport that moves no data: the base of the stubs that tests put
// where a peer's channel is asked about it (a routed transport's parts, a
// shared-memory wait's control channel).
class NoDataTransport : public Transport {
 public:
  NoDataTransport(int rank, int size) : rank_(rank), size_(size) {}
  std::string_view name() const override { return "stub"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool can_connect(int) const override { return true; }
  RequestPtr isend(int, uint32_t, const CallSignature&, std::span<const std::byte>) override {
    throw InvariantError("the stub moves no data");
  }
  RequestPtr irecv(int, uint32_t, const CallSignature&, std::span<std::byte>) override {
    throw InvariantError("the stub moves no data");
  }
  void close() override {}
  void fail(chorus_result_t, const std::string&, const Spared&) override {}

 private:
  int rank_, size_;
};

inline void wait(Transport& t, const RequestPtr& r) {
  wait_one(t, r, Deadline::after(std::chrono::seconds(20)), 10, "test");
}

inline chorus_result_t error_code(Transport& t, const RequestPtr& r,
                                  std::string* message = nullptr) {
  try {
    wait(t, r);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  return CHORUS_SUCCESS;
}

// Calls `check` until it throws an IoError (what arrives in the background:
// a notice, an announcement, a death a watch saw), for at most 20 s; the
// error, or none.
template <typename Check>
std::optional<IoError> first_error(Check&& check) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      check();
    } catch (const IoError& e) {
      return e;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::nullopt;
}

// Messages between rank0 and rank1 of calls that do not match: another
// count in the same call number, then a message larger than the receive
// buffer, then a smaller one. Each receive fails with a mismatch naming
// both ranks' calls or both sizes; the sends succeed (the mismatch is the
// receiver's to report).
inline void check_mismatches_reported(Transport& rank0, Transport& rank1) {
  std::vector<std::byte> data(64), got(64), small(8);
  std::string message;
  auto send = rank0.isend(1, 1, sig_of(3, 16), data);
  auto recv = rank1.irecv(0, 1, sig_of(3, 17), got);
  CHECK(error_code(rank1, recv, &message) == CHORUS_ERR_MISMATCH);
  CHECK_THAT(message, Catch::Contains("rank 0 called allreduce #3 (count 16") &&
                          Catch::Contains("rank 1 called allreduce #3 (count 17"));
  auto send2 = rank0.isend(1, 1, sig_of(4, 1), data);
  auto recv2 = rank1.irecv(0, 1, sig_of(4, 1), small);
  CHECK(error_code(rank1, recv2, &message) == CHORUS_ERR_MISMATCH);
  CHECK_THAT(message, Catch::Contains("64 bytes") && Catch::Contains("8 bytes"));
  auto send3 = rank0.isend(1, 1, sig_of(5, 1), small);
  auto recv3 = rank1.irecv(0, 1, sig_of(5, 1), got);
  CHECK(error_code(rank1, recv3, &message) == CHORUS_ERR_MISMATCH);
  CHECK_THAT(message, Catch::Contains("sent 8 bytes") && Catch::Contains("expected 64 bytes"));
  for (const auto& s : {send, send2, send3}) CHECK(error_code(rank0, s) == CHORUS_SUCCESS);
}

// Rank 1 sent `part` with `tag` in call #3 (16 bytes) and died without a
// goodbye while `rank0` was in #3, with `posted` a receive of #3 from it
// (another tag) that it never sent. The death must fail `posted` at once,
// spare #3 (its part, which arrived, is taken; a second receive and a send
// fail at once) and not #4.
inline void check_death_spared_call(Transport& rank0, const RequestPtr& posted, uint32_t tag,
                                    std::span<const std::byte> part) {
  std::string message;
  CHECK(error_code(rank0, posted, &message) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("rank 1 failed"));
  REQUIRE(first_error([&] { rank0.check_failed(); }));
  CHECK_NOTHROW(rank0.check_call(tag, sig_of(3, part.size())));
  std::vector<std::byte> got(part.size());
  auto arrived = rank0.irecv(1, tag, sig_of(3, part.size()), got);
  CHECK(error_code(rank0, arrived) == CHORUS_SUCCESS);
  CHECK(std::equal(got.begin(), got.end(), part.begin(), part.end()));
  auto more = rank0.irecv(1, tag, sig_of(3, part.size()), got);
  CHECK(error_code(rank0, more, &message) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("rank 1 failed"));
  auto send = rank0.isend(1, tag, sig_of(3, part.size()), part);
  CHECK(error_code(rank0, send, &message) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("rank 1 failed"));
  CHECK_THROWS(rank0.check_call(tag, sig_of(4, part.size())));
}

}  // namespace chorus::test
