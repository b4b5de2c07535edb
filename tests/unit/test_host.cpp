// CPUs per host (base/topology/host.hpp): the union of the ranks' affinities,
// so that ranks bound one per CPU fit the host.
#include <catch2/catch.hpp>

#include "base/core/config.hpp"
#include "base/core/error.hpp"
#include "base/topology/host.hpp"

using namespace chorus;

TEST_CASE("CPU lists: the union's size", "[host]") {
  CHECK(topology::union_cpu_count({"0", "1"}) == 2);
  CHECK(topology::union_cpu_count({"0-1", "0-1", "0-1", "0-1"}) == 2);
  CHECK(topology::union_cpu_count({"0", "0"}) == 1);
  CHECK(topology::union_cpu_count({"0-3,8", "2"}) == 5);
  CHECK(topology::union_cpu_count({}) == 0);
  CHECK_THROWS_AS(topology::union_cpu_count({"0-x"}), UsageError);
}

TEST_CASE("CPU lists: this process's affinity", "[host]") {
  const std::string mine = topology::my_cpu_list();
  INFO(mine);
  REQUIRE_FALSE(mine.empty());
  CHECK(topology::union_cpu_count({mine}) == online_cores());
}

TEST_CASE("CPUs on a host count only that host's ranks; unknown lists fall back", "[host]") {
  topology::HostMap map;
  map.host_of_rank = {"a", "a", "b", "b", "b"};
  map.cpus_of_rank = {"0", "1", "2-5", "2-5", "6"};
  map.rank = 0;
  CHECK(map.cpus_on_my_host() == 2);
  CHECK(map.ranks_on_my_host() == 2);
  map.rank = 3;
  CHECK(map.cpus_on_my_host() == 5);
  map.cpus_of_rank.clear();
  CHECK(map.cpus_on_my_host() == online_cores());
}
