// chorusrun's host list, hostfile and rank mapping (tools/launcher/hosts.hpp).
#include <catch2/catch.hpp>

#include "base/core/error.hpp"
#include "tools/launcher/hosts.hpp"

using namespace chorus;
using namespace chorus::launcher;

namespace {

std::vector<int> hosts_of(const std::vector<RankPlacement>& placement) {
  std::vector<int> out;
  for (const auto& p : placement) out.push_back(p.host);
  return out;
}

std::vector<int> local_ranks_of(const std::vector<RankPlacement>& placement) {
  std::vector<int> out;
  for (const auto& p : placement) out.push_back(p.local_rank);
  return out;
}

}  // namespace

TEST_CASE("-H: names with and without slots; a repeated name adds up", "[hosts]") {
  auto hosts = parse_host_list("a:2,b,c:3,a");
  REQUIRE(hosts.size() == 3);
  CHECK(hosts[0].name == "a");
  CHECK(hosts[0].slots == 3);
  CHECK(hosts[1].name == "b");
  CHECK(hosts[1].slots == 1);
  CHECK(hosts[2].slots == 3);
  CHECK(parse_host_list("node-1.example.org:4")[0].name == "node-1.example.org");
  CHECK_THROWS_AS(parse_host_list("a:0"), UsageError);
  CHECK_THROWS_AS(parse_host_list("a:x"), UsageError);
  CHECK_THROWS_AS(parse_host_list("a:2x"), UsageError);
  CHECK_THROWS_AS(parse_host_list("a,,b"), UsageError);
  CHECK_THROWS_AS(parse_host_list(""), UsageError);
  CHECK_THROWS_AS(parse_host_list("a;rm -rf /"), UsageError);  // names go into a shell command
}

TEST_CASE("hostfile: slots, comments, blank lines, errors with the line", "[hosts]") {
  auto hosts = parse_hostfile(
      "# the cluster\n"
      "\n"
      "  a slots=2   # first\n"
      "b\tslots=4 max_slots=8\n"
      "c\n"
      "a slots=1\n",
      "hf");
  REQUIRE(hosts.size() == 3);
  CHECK(hosts[0].name == "a");
  CHECK(hosts[0].slots == 3);
  CHECK(hosts[1].slots == 4);
  CHECK(hosts[2].name == "c");
  CHECK(hosts[2].slots == 1);
  CHECK(parse_hostfile("a slots=2", "hf").at(0).slots == 2);  // no final newline
  CHECK_THROWS_WITH(parse_hostfile("a\nb slots=0\n", "hf"), Catch::Contains("hf:2"));
  CHECK_THROWS_WITH(parse_hostfile("a cpus=2\n", "hf"), Catch::Contains("hf:1"));
  CHECK_THROWS_AS(parse_hostfile("# only a comment\n\n", "hf"), UsageError);
}

TEST_CASE("mapping by slot fills each host in turn", "[hosts]") {
  const auto hosts = parse_host_list("a:2,b:2");
  auto placement = map_ranks(hosts, 4, MapBy::kSlot);
  CHECK(hosts_of(placement) == std::vector<int>{0, 0, 1, 1});
  CHECK(local_ranks_of(placement) == std::vector<int>{0, 1, 0, 1});
  for (const auto& p : placement) CHECK(p.local_size == 2);
  // Fewer ranks than slots: the first host first.
  placement = map_ranks(hosts, 3, MapBy::kSlot);
  CHECK(hosts_of(placement) == std::vector<int>{0, 0, 1});
  CHECK(placement[2].local_size == 1);
  CHECK(placement[0].local_size == 2);
}

TEST_CASE("mapping by node goes round the hosts, skipping full ones", "[hosts]") {
  auto placement = map_ranks(parse_host_list("a:2,b:2"), 4, MapBy::kNode);
  CHECK(hosts_of(placement) == std::vector<int>{0, 1, 0, 1});
  CHECK(local_ranks_of(placement) == std::vector<int>{0, 0, 1, 1});
  placement = map_ranks(parse_host_list("a:1,b:3,c:1"), 5, MapBy::kNode);
  CHECK(hosts_of(placement) == std::vector<int>{0, 1, 2, 1, 1});
  CHECK(local_ranks_of(placement) == std::vector<int>{0, 0, 0, 1, 2});
  CHECK(placement[1].local_size == 3);
}

TEST_CASE("np 0 takes every slot; more ranks than slots is an error", "[hosts]") {
  CHECK(map_ranks(parse_host_list("a:2,b:3"), 0, MapBy::kSlot).size() == 5);
  CHECK_THROWS_WITH(map_ranks(parse_host_list("a:2,b:2"), 5, MapBy::kSlot),
                    Catch::Contains("do not fit"));
  CHECK(parse_map_by("node") == MapBy::kNode);
  CHECK_THROWS_AS(parse_map_by("core"), UsageError);
}
