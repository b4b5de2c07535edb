// Selection beyond the cost model: CHORUS_ALGO naming a hierarchical
// algorithm's inner algorithms, and the tuning file (CHORUS_TUNING_FILE) with
// its precedence between the override and the model.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <tuple>

#include "base/core/error.hpp"
#include "collectives/call.hpp"
#include "collectives/common/subcall.hpp"
#include "collectives/registry.hpp"
#include "collectives/tuner/tuning_file.hpp"
#include "tests/coll/harness.hpp"
#include "tests/coll/plan_support.hpp"

using namespace chorus;
using namespace chorus::test;

namespace {

// What the stage observer saw: (team name, stage collective, algorithm).
std::mutex seen_mutex;
std::set<std::tuple<std::string, std::string, std::string>> seen;

void record_stage(const Team& team, const CollectiveCall& call, const AlgorithmSpec& algo) {
  std::lock_guard<std::mutex> lock(seen_mutex);
  seen.emplace(team.name, std::string(collective_name(call.kind)), std::string(algo.name));
}

// The raw string's delimiter: the algorithm names hold ')"'.
const char* const kTable = R"json({"version": 1,
  "links": {"other_host": {"alpha_us": 35.0, "gbps": 0.95}},
  "entries": [
    {"collective": "allreduce", "ranks": 4, "hosts": 1, "lo": 0, "hi": 4096,
     "algorithm": "ring", "times_us": {"ring": 20.5, "recursive_doubling": 31.0, "rabenseifner": 25}},
    {"collective": "allreduce", "ranks": 4, "hosts": 2, "lo": 0, "hi": null,
     "algorithm": "hierarchical(across=ring)", "times_us": {"hierarchical(across=ring)": 80.1}}]})json";

}  // namespace

TEST_CASE("CHORUS_ALGO: a hierarchical algorithm names its stages' algorithms", "[tuner]") {
  auto o = AlgoOverride::parse(
      "allreduce:0-64K:hierarchical(within=shm,across=rabenseifner),64K-inf:ring;"
      "broadcast:0-inf:hierarchical(across=tree);allgather:0-inf:hierarchical(within=linear)");
  const AlgoChoice* c = o.lookup_choice(CollectiveKind::allreduce, 100);
  REQUIRE(c);
  CHECK(c->algo->name == "hierarchical");
  CHECK(c->within == "shm");
  CHECK(c->across == "rabenseifner");
  CHECK(c->name() == "hierarchical(within=shm,across=rabenseifner)");
  CHECK(o.lookup(CollectiveKind::allreduce, 1 << 20)->name == "ring");
  CHECK(o.lookup_choice(CollectiveKind::broadcast, 8)->name() == "hierarchical(across=tree)");
  CHECK(o.lookup_choice(CollectiveKind::allgather, 8)->within == "linear");
}

TEST_CASE("CHORUS_ALGO: bad inner names are refused, listing the stages' algorithms", "[tuner]") {
  for (const char* bad :
       {"allreduce:0-inf:hierarchical(across=bogus)", "allreduce:0-inf:hierarchical(sideways=ring)",
        "allreduce:0-inf:hierarchical(across)", "allreduce:0-inf:ring(across=ring)",
        "allreduce:0-inf:hierarchical(across=ring", "allreduce:0-inf:hierarchical(across=ring)x",
        "allreduce:0-inf:hierarchical()", "allgather:0-inf:hierarchical(across=tree)",
        "reduce:0-inf:ring(within=shm)"}) {
    INFO(bad);
    CHECK_THROWS_AS(AlgoOverride::parse(bad), UsageError);
  }
  try {
    AlgoOverride::parse("allreduce:0-inf:hierarchical(within=shm,across=bogus)");
    FAIL("accepted");
  } catch (const UsageError& e) {
    CHECK_THAT(e.what(), Catch::Contains("bogus") && Catch::Contains("rabenseifner") &&
                             Catch::Contains("allreduce: "));
  }
}

TEST_CASE("tuning file: parsed, written back, and matched by collective, ranks, hosts and size",
          "[tuner]") {
  const TuningTable t = TuningTable::parse(kTable, "t.json");
  REQUIRE(t.entries.size() == 2);
  CHECK(t.links.at("other_host").gbps == 0.95);
  CHECK(t.find(CollectiveKind::allreduce, 4, 1, 4095) == &t.entries[0]);
  CHECK(t.find(CollectiveKind::allreduce, 4, 1, 4096) == nullptr);
  CHECK(t.find(CollectiveKind::allreduce, 8, 1, 8) == nullptr);
  CHECK(t.find(CollectiveKind::broadcast, 4, 1, 8) == nullptr);
  CHECK(t.find(CollectiveKind::allreduce, 4, 2, std::size_t(1) << 40) == &t.entries[1]);
  CHECK(t.entries[1].choice.across == "ring");
  const TuningTable again = TuningTable::parse(t.to_json(), "again");
  REQUIRE(again.entries.size() == 2);
  CHECK(again.entries[1].hi == SIZE_MAX);
  CHECK(again.entries[0].times_us == t.entries[0].times_us);
  CHECK(again.entries[1].choice.name() == "hierarchical(across=ring)");
  CHECK(again.links.at("other_host").alpha_us == 35.0);
}

TEST_CASE("tuning file: a malformed one is refused naming the file and the problem", "[tuner]") {
  for (const char* bad :
       {"not json", "[]", R"({"version": 2, "entries": []})", R"({"version": 1})",
        R"({"version": 1, "entries": [{"collective": "allreduce"}]})",
        R"({"version": 1, "entries": [{"collective": "nosuch", "ranks": 1, "hosts": 1, "lo": 0,
            "hi": null, "algorithm": "ring"}]})",
        R"({"version": 1, "entries": [{"collective": "allreduce", "ranks": 4, "hosts": 1,
            "lo": 10, "hi": 10, "algorithm": "ring"}]})",
        R"({"version": 1, "entries": [{"collective": "allreduce", "ranks": "4", "hosts": 1,
            "lo": 0, "hi": null, "algorithm": "ring"}]})",
        R"({"version": 1, "entries": [{"collective": "allreduce", "ranks": 4, "hosts": 1,
            "lo": 0, "hi": null, "algorithm": "bogus"}]})"}) {
    INFO(bad);
    try {
      TuningTable::parse(bad, "/some/where.json");
      FAIL("accepted");
    } catch (const UsageError& e) {
      CHECK_THAT(e.what(), Catch::Contains("/some/where.json"));
    }
  }
  CHECK_THROWS_WITH(TuningTable::load("/nonexistent/tune.json"),
                    Catch::Contains("/nonexistent/tune.json"));
}

TEST_CASE("tuning file: after CHORUS_ALGO, before the cost model, unless its choice refuses",
          "[tuner]") {
  auto table = std::make_shared<const TuningTable>(TuningTable::parse(kTable, "t.json"));
  AlgoOverride user;
  user.set_tuning(table);
  const CostModel model;
  const auto call = call_of(CollectiveKind::allreduce);
  Selection s = select_algorithm(call, 8, plan_team(4), user, model);
  CHECK(s.spec->name == "ring");
  CHECK(s.tuned == &user.tuning()->entries[0]);
  CHECK_THAT(s.why(), Catch::Contains("tuning file chose ring") &&
                          Catch::Contains("measured 20.5 us") &&
                          Catch::Contains("next best rabenseifner 25.0 us"));
  // No entry for this size or team: the model.
  CHECK(select_algorithm(call, 1 << 20, plan_team(4), user, model).tuned == nullptr);
  CHECK(select_algorithm(call, 8, plan_team(3), user, model).tuned == nullptr);
  // The entry for two hosts names the hierarchical algorithm, which refuses
  // a team on one host (no hierarchy).
  Team spans = plan_team(4);
  spans.placement.ring_crossings = 1;
  CHECK(hosts_of(spans) == 0);
  CHECK(select_algorithm(call, 8, spans, user, model).tuned == nullptr);

  AlgoOverride both = AlgoOverride::parse("allreduce:0-inf:recursive_doubling");
  both.set_tuning(table);
  s = select_algorithm(call, 8, plan_team(4), both, model);
  CHECK(s.forced);
  CHECK(s.spec->name == "recursive_doubling");
}

TEST_CASE("CHORUS_ALGO: hierarchical(across=X) runs X between hosts, with correct sums",
          "[tuner][hierarchy]") {
  set_stage_observer(record_stage);
  for (const char* across : {"ring", "recursive_doubling"}) {
    for (const char* within : {"", "ring"}) {
      const std::string rule =
          *within ? fmt::format("allreduce:0-inf:hierarchical(within={},across={})", within, across)
                  : fmt::format("allreduce:0-inf:hierarchical(across={})", across);
      INFO(rule);
      seen.clear();
      RunOptions o;
      o.hosts = "aabb";
      const std::size_t count = 1000;
      auto outcomes = run_ranks(4, o, [&](RankEnv& env) {
        // The hierarchy reads the override through a pointer to env.user.
        env.user = AlgoOverride::parse(rule);
        std::vector<float> send(count), recv(count);
        std::iota(send.begin(), send.end(), static_cast<float>(env.rank()));
        CollectiveCall call = call_of(CollectiveKind::allreduce);
        call.op = ReduceOp::sum;
        call.count = count;
        call.send = send.data();
        call.recv = recv.data();
        const CallShape shape = validate(call, env.rank(), env.size());
        Selection s = select_algorithm(call, shape.bytes, env.team, env.user, env.model);
        CHORUS_CHECK(s.spec->name == "hierarchical", "chose {}", s.spec->name);
        CallSignature sig = make_sig(call.kind, 1, count, call.dtype, call.op);
        sig.algo = s.id;
        CollectiveContext ctx = env.context(sig);
        s.spec->run(ctx, call, shape);
        for (std::size_t i = 0; i < count; ++i)
          CHORUS_CHECK(recv[i] == static_cast<float>(4 * i + 6), "element {}: {}", i, recv[i]);
      });
      REQUIRE(failures(outcomes) == "");
      std::lock_guard<std::mutex> lock(seen_mutex);
      CHECK(seen.count({"lane", "allreduce", across}) == 1);
      CHECK(seen.size() == 3);  // the lane's allreduce, the host's two stages
      if (*within) {
        CHECK(seen.count({"host", "reduce_scatterv", within}) == 1);
        CHECK(seen.count({"host", "allgatherv", within}) == 1);
      }
    }
  }
  set_stage_observer(nullptr);
}
