// The machine's description (base/topology/machine.hpp), checked against
// what the kernel says without hwloc: sysconf, /sys/devices/system/cpu and
// /sys/class/net.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "base/core/error.hpp"
#include "base/topology/host.hpp"
#include "base/topology/machine.hpp"

using namespace chorus;
namespace fs = std::filesystem;

namespace {

// The online CPUs, counted from the kernel's list ("0-3,8").
int online_cpus_from_sysfs() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string list;
  std::getline(in, list);
  return topology::union_cpu_count({list});
}

// Distinct (package, core) pairs of the online CPUs, from sysfs.
int cores_from_sysfs() {
  std::set<std::pair<std::string, std::string>> cores;
  for (const auto& e : fs::directory_iterator("/sys/devices/system/cpu")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("cpu", 0) != 0 || name.size() < 4 || !std::isdigit(name[3])) continue;
    std::ifstream package(e.path() / "topology/physical_package_id");
    std::ifstream core(e.path() / "topology/core_id");
    std::string p, c;
    if (!std::getline(package, p) || !std::getline(core, c)) continue;  // offline
    cores.insert({p, c});
  }
  return static_cast<int>(cores.size());
}

// The memory the kernel gives its NUMA nodes (their meminfo's MemTotal),
// what hwloc reads; 0 where sysfs has no nodes. It can be far below the RAM
// /proc/meminfo counts (seen: 7.1 of 23.5 GiB on a VM with hot-added memory).
uint64_t node_memory_from_sysfs() {
  uint64_t total = 0;
  if (!fs::exists("/sys/devices/system/node")) return 0;
  for (const auto& e : fs::directory_iterator("/sys/devices/system/node")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() < 5 || !std::isdigit(name[4])) continue;
    std::ifstream in(e.path() / "meminfo");
    for (std::string line; std::getline(in, line);) {
      const auto at = line.find("MemTotal:");
      if (at == std::string::npos) continue;
      total += std::stoull(line.substr(at + 9)) * 1024;  // "Node 0 MemTotal:  7431964 kB"
      break;
    }
  }
  return total;
}

}  // namespace

TEST_CASE("machine: CPU counts agree with the kernel", "[machine]") {
  const topology::MachineInfo m = topology::detect_machine();
  INFO(m.describe());
  CHECK(m.pus == sysconf(_SC_NPROCESSORS_ONLN));
  CHECK(m.pus == online_cpus_from_sysfs());
  CHECK(m.cores >= 1);
  CHECK(m.cores <= m.pus);
  if (const int cores = cores_from_sysfs(); cores > 0) CHECK(m.cores == cores);
  CHECK(m.packages >= 1);
  CHECK(m.packages <= m.cores);
  CHECK(m.numa_nodes >= 1);
  CHECK(m.numa.size() == static_cast<std::size_t>(m.numa_nodes));
  uint64_t memory = 0;
  for (const auto& n : m.numa) memory += n.memory_bytes;
  // The nodes' memory adds up to what the kernel gives its nodes, or where
  // sysfs has none, to about the RAM it counts (it keeps some back).
  const uint64_t ram = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
  const uint64_t nodes = node_memory_from_sysfs();
  INFO("RAM " << ram << " bytes, NUMA nodes' MemTotal in sysfs " << nodes << " bytes");
  const uint64_t reference = nodes > 0 ? nodes : ram;
  CHECK(memory <= reference + reference / 20);
  CHECK(memory >= reference - reference / (nodes > 0 ? 20 : 2));
}

TEST_CASE("machine: caches", "[machine]") {
  const topology::MachineInfo m = topology::detect_machine();
  INFO(m.describe());
  for (const auto& c : m.caches) {
    CHECK(c.level >= 1);
    CHECK(c.size_bytes > 0);
    CHECK(c.count >= 1);
    CHECK(c.cores_per_cache >= 1);
    CHECK(c.cores_per_cache <= m.cores);
    // Each core sits under at most one cache of each level and kind.
    CHECK(c.count <= m.cores);
  }
}

TEST_CASE("machine: every network interface of /sys/class/net but lo", "[machine]") {
  const topology::MachineInfo m = topology::detect_machine();
  INFO(m.describe());
  std::set<std::string> reported;
  for (const auto& d : m.net_devices) {
    if (d.kind == "network") reported.insert(d.name);
    CHECK((d.kind == "network" || d.kind == "openfabrics"));
  }
  CHECK(reported.count("lo") == 0);
  for (const auto& e : fs::directory_iterator("/sys/class/net")) {
    const std::string name = e.path().filename().string();
    if (name == "lo") continue;
    INFO(name);
    CHECK(reported.count(name) == 1);
    // A device on a bus (it has a `device` link) comes from hwloc with its
    // PCI address when it is on PCI; a software one is marked virtual.
    for (const auto& d : m.net_devices)
      if (d.name == name) CHECK(d.is_virtual == !fs::exists(e.path() / "device"));
  }
  for (const auto& name : reported) {
    INFO(name);
    CHECK(fs::exists(fs::path("/sys/class/net") / name));
  }
}

TEST_CASE("machine: JSON round trip", "[machine]") {
  const topology::MachineInfo m = topology::detect_machine();
  const nlohmann::json j = m;
  CHECK(j.get<topology::MachineInfo>() == m);
  CHECK(nlohmann::json::parse(j.dump()).get<topology::MachineInfo>() == m);
  nlohmann::json broken = j;
  broken.erase("cores");
  CHECK_THROWS_AS(broken.get<topology::MachineInfo>(), UsageError);
  broken = j;
  broken["caches"] = {{{"level", "one"}}};
  CHECK_THROWS_AS(broken.get<topology::MachineInfo>(), UsageError);
}

TEST_CASE("machine: the description names every count and device", "[machine]") {
  topology::MachineInfo m;
  m.hostname = "h";
  m.packages = 2;
  m.numa_nodes = 1;
  m.cores = 8;
  m.pus = 16;
  m.numa = {{0, uint64_t(64) << 30}};
  m.caches = {{3, "unified", 32 << 20, 2, 4}};
  m.net_devices = {{"ib0", "openfabrics", false, "0000:3b:00.0"}, {"eth0", "network", true, ""}};
  const std::string text = m.describe();
  CHECK(text.find("2 package(s), 1 NUMA node(s), 8 core(s), 16 hardware thread(s)") !=
        std::string::npos);
  CHECK(text.find("NUMA node 0: 64 GiB") != std::string::npos);
  CHECK(text.find("L3 unified: 2 x 32 MiB, each shared by 4 core(s)") != std::string::npos);
  CHECK(text.find("openfabrics device ib0 (PCI 0000:3b:00.0)") != std::string::npos);
  CHECK(text.find("network device eth0 (virtual)") != std::string::npos);
}
