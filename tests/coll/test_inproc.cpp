// The in-process transport on its own: matching, rendezvous, signature and
// size checks, abort and close.
#include <catch2/catch.hpp>

#include <cstring>
#include <thread>
#include <vector>

#include "base/core/error.hpp"
#include "tests/coll/harness.hpp"
#include "transports/inproc/inproc.hpp"

using namespace chorus;
using namespace chorus::test;

namespace {

std::span<std::byte> bytes_of(std::vector<int>& v) {
  return std::as_writable_bytes(std::span<int>(v));
}

const CallSignature kSig = make_sig(CollectiveKind::allreduce, 3, 7, DataType::f32);

// The error a finished request failed with.
std::pair<chorus_result_t, std::string> error_of(const RequestPtr& r) {
  REQUIRE(r->done());
  try {
    r->completion().rethrow_if_failed();
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  return {CHORUS_SUCCESS, ""};
}

}  // namespace

TEST_CASE("inproc: send then receive, receive then send", "[inproc]") {
  auto fabric = make_inproc_fabric(2);
  InprocTransport a(fabric, 0), b(fabric, 1);
  CHECK(a.name() == "inproc");
  CHECK(a.size() == 2);
  CHECK(b.rank() == 1);
  CHECK(a.can_connect(1));
  CHECK_FALSE(a.can_connect(2));

  std::vector<int> src{1, 2, 3}, dst(3, 0);
  auto s = a.isend(1, 5, kSig, bytes_of(src));
  CHECK_FALSE(s->done());  // rendezvous: waits for the receive
  auto r = b.irecv(0, 5, kSig, bytes_of(dst));
  CHECK(s->done());
  CHECK(r->done());
  CHECK(error_of(r).first == CHORUS_SUCCESS);
  CHECK(dst == src);

  std::vector<int> dst2(3, 0);
  auto r2 = b.irecv(0, 5, kSig, bytes_of(dst2));
  CHECK_FALSE(r2->done());
  auto s2 = a.isend(1, 5, kSig, bytes_of(src));
  wait_one(b, r2, Deadline::after_ms(1000), 10, "test");
  wait_one(a, s2, Deadline::after_ms(1000), 10, "test");
  CHECK(dst2 == src);
}

TEST_CASE("inproc: FIFO per (peer, tag), tags independent, zero bytes", "[inproc]") {
  auto fabric = make_inproc_fabric(3);
  InprocTransport a(fabric, 0), b(fabric, 1), c(fabric, 2);
  std::vector<std::vector<int>> msgs{{1}, {2}, {3}};
  std::vector<RequestPtr> sends;
  for (auto& m : msgs) sends.push_back(a.isend(1, 7, kSig, bytes_of(m)));
  std::vector<int> other{42}, got_other{0};
  sends.push_back(a.isend(1, 8, kSig, bytes_of(other)));
  auto ro = b.irecv(0, 8, kSig, bytes_of(got_other));  // tag 8 overtakes tag 7
  CHECK(ro->done());
  CHECK(got_other[0] == 42);
  for (int i = 0; i < 3; ++i) {
    std::vector<int> got{0};
    auto r = b.irecv(0, 7, kSig, bytes_of(got));
    REQUIRE(r->done());
    CHECK(got[0] == i + 1);
  }
  for (auto& s : sends) CHECK(s->done());

  auto z1 = c.irecv(1, 7, kSig, {});
  auto z2 = b.isend(2, 7, kSig, {});
  CHECK(error_of(z1).first == CHORUS_SUCCESS);
  CHECK(error_of(z2).first == CHORUS_SUCCESS);
  auto self_r = c.irecv(2, 9, kSig, {});
  auto self_s = c.isend(2, 9, kSig, {});
  CHECK(error_of(self_r).first == CHORUS_SUCCESS);
  CHECK(error_of(self_s).first == CHORUS_SUCCESS);
}

TEST_CASE("inproc: a different signature fails both sides naming both calls", "[inproc]") {
  auto fabric = make_inproc_fabric(3);
  InprocTransport a(fabric, 1), b(fabric, 2);
  std::vector<int> src(7), dst(7);
  auto other = make_sig(CollectiveKind::allreduce, 3, 8, DataType::f32);
  auto r = a.irecv(2, 1, kSig, bytes_of(dst));
  auto s = b.isend(1, 1, other, bytes_of(src));
  auto [code, message] = error_of(r);
  CHECK(code == CHORUS_ERR_MISMATCH);
  CHECK(message ==
        "rank 2 called allreduce #3 (count 8, float32, sum) but rank 1 called allreduce #3 "
        "(count 7, float32, sum)");
  CHECK(error_of(s).first == CHORUS_ERR_MISMATCH);
}

TEST_CASE("inproc: a different size fails with a mismatch", "[inproc]") {
  auto fabric = make_inproc_fabric(2);
  InprocTransport a(fabric, 0), b(fabric, 1);
  std::vector<int> src(4), dst(3);
  auto s = a.isend(1, 1, kSig, bytes_of(src));
  auto r = b.irecv(0, 1, kSig, bytes_of(dst));
  auto [code, message] = error_of(r);
  CHECK(code == CHORUS_ERR_MISMATCH);
  CHECK_THAT(message,
             Catch::Contains("rank 0 sent 16 bytes") && Catch::Contains("rank 1 expected 12"));
  CHECK(error_of(s).first == CHORUS_ERR_MISMATCH);
}

TEST_CASE("inproc: abort fails pending and later requests of every rank", "[inproc]") {
  auto fabric = make_inproc_fabric(3);
  InprocTransport a(fabric, 0), b(fabric, 1), c(fabric, 2);
  std::vector<int> buf(2);
  auto pending_recv = a.irecv(2, 1, kSig, bytes_of(buf));
  auto pending_send = c.isend(1, 1, kSig, bytes_of(buf));
  std::thread waiter([&] {
    try {
      wait_one(a, pending_recv, Deadline::after_ms(10000), 10, "waiter");
    } catch (const Error&) {
    }
  });
  b.abort("out of cheese");
  waiter.join();
  for (const auto& r : {pending_recv, pending_send}) {
    auto [code, message] = error_of(r);
    CHECK(code == CHORUS_ERR_ABORTED);
    CHECK(message == "rank 1 aborted: out of cheese");
  }
  CHECK(fabric->aborted());
  auto later = a.isend(1, 1, kSig, bytes_of(buf));
  CHECK(error_of(later).first == CHORUS_ERR_ABORTED);
}

TEST_CASE("inproc: close fails receives from the closed rank", "[inproc]") {
  auto fabric = make_inproc_fabric(3);
  InprocTransport a(fabric, 0), c(fabric, 2);
  auto b = std::make_unique<InprocTransport>(fabric, 1);
  std::vector<int> buf(2);
  auto pending = a.irecv(1, 1, kSig, bytes_of(buf));
  auto own = b->irecv(2, 1, kSig, bytes_of(buf));
  b.reset();  // the destructor closes
  auto [code, message] = error_of(pending);
  CHECK(code == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("rank 1"));
  CHECK(error_of(own).first == CHORUS_ERR_INVALID_USAGE);
  CHECK(error_of(a.irecv(1, 1, kSig, bytes_of(buf))).first == CHORUS_ERR_PEER_FAILURE);
  CHECK(error_of(c.isend(1, 1, kSig, bytes_of(buf))).first == CHORUS_ERR_PEER_FAILURE);
  // Ranks still open are unaffected.
  auto r = c.irecv(0, 1, kSig, bytes_of(buf));
  auto s = a.isend(2, 1, kSig, bytes_of(buf));
  CHECK(error_of(r).first == CHORUS_SUCCESS);
  CHECK(error_of(s).first == CHORUS_SUCCESS);
  a.close();
  a.close();  // idempotent
  CHECK(error_of(a.isend(2, 1, kSig, bytes_of(buf))).first == CHORUS_ERR_INVALID_USAGE);
}

TEST_CASE("inproc: an unmatched receive times out naming the peer", "[inproc]") {
  auto fabric = make_inproc_fabric(2);
  InprocTransport a(fabric, 0), b(fabric, 1);
  std::vector<int> buf(1);
  auto r = a.irecv(1, 1, kSig, bytes_of(buf));
  try {
    wait_one(a, r, Deadline::after_ms(50), 10, "test op");
    FAIL("no timeout");
  } catch (const IoError& e) {
    CHECK(e.code() == CHORUS_ERR_TIMEOUT);
    CHECK_THAT(std::string(e.what()), Catch::Contains("receive from rank 1"));
  }
}

TEST_CASE("inproc: many messages between two threads arrive in order", "[inproc]") {
  auto fabric = make_inproc_fabric(2);
  constexpr int kMessages = 2000;
  std::vector<int> got(kMessages, -1);
  std::thread receiver([&] {
    InprocTransport b(fabric, 1);
    std::vector<RequestPtr> rs;
    for (int i = 0; i < kMessages; ++i)
      rs.push_back(b.irecv(0, 1, kSig, std::as_writable_bytes(std::span<int>(&got[i], 1))));
    wait_all(b, rs, Deadline::after_ms(30000), 10, "receiver");
  });
  {
    InprocTransport a(fabric, 0);
    std::vector<int> values(kMessages);
    std::vector<RequestPtr> ss;
    for (int i = 0; i < kMessages; ++i) {
      values[i] = i;
      ss.push_back(a.isend(1, 1, kSig, std::as_bytes(std::span<const int>(&values[i], 1))));
    }
    wait_all(a, ss, Deadline::after_ms(30000), 10, "sender");
    receiver.join();
  }
  for (int i = 0; i < kMessages; ++i) REQUIRE(got[i] == i);
}
