// Transport choice per peer (transports/routes.hpp) from host identities, and
// what the routed transport asks of its parts (transports/routed.hpp).
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/core/error.hpp"
#include "tests/common/transport_test.hpp"
#include "transports/routed.hpp"
#include "transports/routes.hpp"

using namespace chorus;

namespace {
topology::HostMap hosts(std::vector<std::string> ids, int rank) {
  topology::HostMap m;
  m.host_of_rank = std::move(ids);
  m.rank = rank;
  return m;
}
}  // namespace

TEST_CASE("one host: shared-memory collectives, TCP point-to-point in auto", "[routes]") {
  auto plan = plan_routes(hosts({"a", "a", "a"}, 1), "auto", true);
  CHECK(plan.shm_collectives);
  CHECK_FALSE(plan.uses_ucx);
  CHECK(plan.peer_transport == std::vector<std::string>{"tcp", "self", "tcp"});
  CHECK_THAT(plan.shm_why, Catch::Contains("all 3 ranks share this host"));
}

TEST_CASE("several hosts: no shared memory anywhere; UCX between hosts with RDMA devices",
          "[routes]") {
  // Without RDMA devices UCX would only use TCP: the TCP transport serves.
  auto plan = plan_routes(hosts({"a", "a", "b", "b"}, 0), "auto", true);
  CHECK_FALSE(plan.shm_collectives);
  CHECK_FALSE(plan.uses_ucx);
  CHECK(plan.peer_transport == std::vector<std::string>{"self", "tcp", "tcp", "tcp"});
  CHECK_THAT(plan.peer_why[2], Catch::Contains("without RDMA devices"));
  // With them at both ends: UCX between hosts, without its shm transports;
  // TCP within a host.
  topology::HostMap rdma = hosts({"a", "a", "b", "b", "c"}, 0);
  rdma.rdma_of_rank = {1, 1, 1, 1, 0};
  plan = plan_routes(rdma, "auto", true);
  CHECK(plan.uses_ucx);
  CHECK_FALSE(plan.ucx_shared_memory);
  CHECK(plan.peer_transport == std::vector<std::string>{"self", "tcp", "ucx", "ucx", "tcp"});
  CHECK_THAT(plan.peer_why[2], Catch::Contains("shared-memory transports off"));
  // The plan of a pair is the same from both ends.
  rdma.rank = 2;
  CHECK(plan_routes(rdma, "auto", true).peer_transport[0] == "ucx");
  rdma.rank = 4;
  CHECK(plan_routes(rdma, "auto", true).peer_transport[0] == "tcp");
  auto without_ucx = plan_routes(hosts({"a", "a", "b", "b"}, 2), "auto", false);
  CHECK(without_ucx.peer_transport == std::vector<std::string>{"tcp", "tcp", "self", "tcp"});
  CHECK_FALSE(without_ucx.uses_ucx);
}

TEST_CASE("CHORUS_TRANSPORT forces a transport or fails clearly", "[routes]") {
  auto tcp = plan_routes(hosts({"a", "a"}, 0), "tcp", true);
  CHECK_FALSE(tcp.shm_collectives);
  CHECK(tcp.peer_transport[1] == "tcp");
  auto ucx = plan_routes(hosts({"a", "a"}, 0), "ucx", true);
  CHECK_FALSE(ucx.shm_collectives);
  CHECK(ucx.ucx_shared_memory);
  CHECK(ucx.peer_transport[1] == "ucx");
  auto shm = plan_routes(hosts({"a", "a"}, 1), "shm", false);
  CHECK(shm.shm_collectives);
  CHECK(shm.peer_transport[0] == "tcp");
  try {
    plan_routes(hosts({"a", "b"}, 0), "shm", true);
    FAIL("shm across hosts was accepted");
  } catch (const UsageError& e) {
    CHECK(e.code() == CHORUS_ERR_UNSUPPORTED);
    CHECK_THAT(std::string(e.what()), Catch::Contains("run on 2 hosts"));
  }
  CHECK_THROWS_AS(plan_routes(hosts({"a", "a"}, 0), "ucx", false), UsageError);
}

TEST_CASE("a single rank has nothing to route", "[routes]") {
  auto plan = plan_routes(hosts({"a"}, 0), "auto", true);
  CHECK_FALSE(plan.shm_collectives);
  CHECK_FALSE(plan.uses_ucx);
  CHECK(plan.peer_transport == std::vector<std::string>{"self"});
}

namespace {

// A transport that only knows which peers said goodbye to it.
class GoodbyeStub final : public test::NoDataTransport {
 public:
  GoodbyeStub(int rank, int size, std::vector<int> left)
      : NoDataTransport(rank, size), left_(std::move(left)) {}
  void check_peer(int peer, uint32_t, const CallSignature&) override {
    if (std::find(left_.begin(), left_.end(), peer) == left_.end()) return;
    // As a progress thread that reads the peer's last message and then its
    // goodbye while a waiter is between its look at a request and this.
    if (completes_on_check) completes_on_check->completion().complete();
    throw IoError(CHORUS_ERR_PEER_FAILURE, fmt::format("rank {} left ({})", peer, name()));
  }

  Request* completes_on_check = nullptr;

 private:
  std::vector<int> left_;
};

}  // namespace

// A leaving rank closes its data transports before its control channel (and
// UCX's close waits for the peers' goodbyes): its goodbye on the data
// transport is the first sign that it left.
TEST_CASE("routed: a peer that left is seen on its data transport, not only on control",
          "[routes]") {
  std::vector<std::unique_ptr<Transport>> parts;
  parts.push_back(std::make_unique<GoodbyeStub>(0, 3, std::vector<int>{}));   // control
  parts.push_back(std::make_unique<GoodbyeStub>(0, 3, std::vector<int>{2}));  // data, to rank 2
  RoutedTransport routed(std::move(parts), {0, 0, 1});
  CallSignature sig;
  sig.seq = 3;
  CHECK_NOTHROW(routed.check_peer(1, 1, sig));
  try {
    routed.check_peer(2, 1, sig);
    FAIL("rank 2 left on the data transport, and check_peer did not say so");
  } catch (const IoError& e) {
    CHECK(e.code() == CHORUS_ERR_PEER_FAILURE);
    CHECK_THAT(e.what(), Catch::Contains("rank 2 left"));
  }
}

// The waiter looks at its request, then asks whether the peer left; the
// peer's last message may complete the request in between (CI found it:
// a 2-rank barrier over UCX failed at the rank whose peer sent its part and
// left). Only a request still pending once the departure is known fails.
TEST_CASE("routed: a peer that left fails a wait only for what never came", "[routes]") {
  std::vector<std::unique_ptr<Transport>> parts;
  parts.push_back(std::make_unique<GoodbyeStub>(0, 2, std::vector<int>{}));   // control
  parts.push_back(std::make_unique<GoodbyeStub>(0, 2, std::vector<int>{1}));  // data, to rank 1
  auto* data = static_cast<GoodbyeStub*>(parts[1].get());
  RoutedTransport routed(std::move(parts), {0, 1});
  CallSignature sig;
  sig.seq = 2;

  auto arrived = std::make_shared<Request>(1, false, 1, sig, 0);
  data->completes_on_check = arrived.get();
  CHECK_NOTHROW(routed.wait_for_progress(*arrived, std::chrono::milliseconds(1)));
  CHECK(arrived->done());
  CHECK_FALSE(arrived->completion().failed());

  auto missing = std::make_shared<Request>(1, false, 1, sig, 0);
  data->completes_on_check = nullptr;
  try {
    routed.wait_for_progress(*missing, std::chrono::milliseconds(1));
    FAIL("rank 1 left with the receive still pending, and the wait did not say so");
  } catch (const IoError& e) {
    CHECK(e.code() == CHORUS_ERR_PEER_FAILURE);
    CHECK_THAT(e.what(), Catch::Contains("rank 1 left"));
  }
}

namespace {

// A control channel that answers asks as told, and records them.
class AskedControl final : public test::NoDataTransport {
 public:
  using NoDataTransport::NoDataTransport;
  bool parts_done(uint32_t, const CallSignature&, std::span<const int> peers,
                  chorus_result_t code) override {
    asked.insert(asked.end(), peers.begin(), peers.end());
    codes.push_back(code);
    return answer_done;
  }

  bool answer_done = false;
  std::vector<int> asked;
  std::vector<chorus_result_t> codes;
};

// A data transport whose arrivals may have been lost since a given time.
class LossyData final : public test::NoDataTransport {
 public:
  using NoDataTransport::NoDataTransport;
  std::optional<Clock::time_point> arrivals_may_be_lost_since() const override { return since; }

  std::optional<Clock::time_point> since;
};

struct LossyRoutes {
  LossyRoutes() {
    std::vector<std::unique_ptr<Transport>> parts;
    parts.push_back(std::make_unique<AskedControl>(0, 3));
    parts.push_back(std::make_unique<LossyData>(0, 3));
    control = static_cast<AskedControl*>(parts[0].get());
    data = static_cast<LossyData*>(parts[1].get());
    routed = std::make_unique<RoutedTransport>(std::move(parts), std::vector<int>{0, 1, 1});
    sig.seq = 3;
  }
  // A wait on rank 1 over the data transport; the error's code and text.
  std::optional<std::pair<chorus_result_t, std::string>> wait(Request& r) {
    try {
      routed->wait_for_progress(r, std::chrono::milliseconds(1));
    } catch (const IoError& e) {
      return std::make_pair(e.code(), std::string(e.what()));
    }
    return std::nullopt;
  }

  AskedControl* control;
  LossyData* data;
  std::unique_ptr<RoutedTransport> routed;
  CallSignature sig;
};

}  // namespace

// A rank killed in the middle of a shared-memory send over UCX can stop its
// peer's receive queue: a live rank's messages never arrive, and a call the
// death spares waited for them until the deadline (CI: a survivor of a
// killed-during alltoall reported nothing for 2 s, until chorusrun killed
// it). Such a wait asks the peer over the control channel instead.
TEST_CASE("routed: a wait on a data transport that may have lost arrivals asks the peer",
          "[routes]") {
  LossyRoutes t;
  auto recv = std::make_shared<Request>(1, false, 1, t.sig, 0);
  SECTION("no loss, or a recent one: the wait goes on, nobody is asked") {
    CHECK_FALSE(t.wait(*recv));
    // Recent however slowly this test runs: the loss is dated ahead.
    t.data->since = Clock::now() + std::chrono::hours(1);
    CHECK_FALSE(t.wait(*recv));
    CHECK(t.control->asked.empty());
  }
  SECTION("the peer's part is not done: it is sealed, and the call fails") {
    t.data->since = Clock::now() - RoutedTransport::kLostArrivalAsk;
    const auto error = t.wait(*recv);
    REQUIRE(error);
    CHECK(error->first == CHORUS_ERR_PEER_FAILURE);
    CHECK_THAT(error->second, Catch::Contains("nothing came from rank 1") &&
                                  Catch::Contains("its part was not done"));
    CHECK(t.control->asked == std::vector<int>{1});
    // Sealed with the failure's code, not a timeout's: it fails as this rank does.
    CHECK(t.control->codes == std::vector<chorus_result_t>{CHORUS_ERR_PEER_FAILURE});
  }
  SECTION("the peer's part is done: its messages get a moment, then the call fails") {
    t.data->since = Clock::now() - RoutedTransport::kLostArrivalAsk;
    t.control->answer_done = true;
    CHECK_FALSE(t.wait(*recv));
    CHECK_FALSE(t.wait(*recv));
    CHECK(t.control->asked == std::vector<int>{1});  // once per peer and call
    auto arrived = std::make_shared<Request>(1, false, 1, t.sig, 0);
    arrived->completion().complete();
    std::this_thread::sleep_for(RoutedTransport::kLostArrivalWait);
    CHECK_FALSE(t.wait(*arrived));  // what came is not failed
    const auto error = t.wait(*recv);
    REQUIRE(error);
    CHECK(error->first == CHORUS_ERR_PEER_FAILURE);
    CHECK_THAT(error->second,
               Catch::Contains("rank 1 did its part") && Catch::Contains("did not arrive"));
    CHECK(t.control->asked == std::vector<int>{1});
  }
}
