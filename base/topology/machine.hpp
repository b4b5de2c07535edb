// What one host is made of, as hwloc sees it: packages, NUMA nodes, cores,
// hardware threads, caches and network devices. chorus-info --topology
// prints it; the JSON form travels through stores and files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace chorus::topology {

struct NumaNode {
  unsigned os_index = 0;
  uint64_t memory_bytes = 0;  // local memory; 0: unknown
  bool operator==(const NumaNode&) const = default;
};

// The caches of one level and kind ("L2 unified"), all alike in size.
struct CacheLevel {
  int level = 1;            // 1 for L1
  std::string kind;         // unified, data or instruction
  uint64_t size_bytes = 0;  // of one cache
  int count = 0;            // caches of this level and kind on the host
  int cores_per_cache = 0;  // cores that share one (the most any shares)
  bool operator==(const CacheLevel&) const = default;
};

struct NetDevice {
  std::string name;  // the OS's name: eth0, ib0, mlx5_0
  std::string kind;  // network or openfabrics
  // A software device (veth, bridge, tunnel: /sys/devices/virtual): what
  // the simulated hosts have. hwloc reports only devices on a bus; these
  // come from /sys/class/net.
  bool is_virtual = false;
  std::string bus;  // PCI address of the device ("0000:00:03.0"); empty when none
  bool operator==(const NetDevice&) const = default;
};

struct MachineInfo {
  std::string hostname;
  int packages = 0;
  int numa_nodes = 0;
  int cores = 0;
  int pus = 0;  // hardware threads
  std::vector<NumaNode> numa;
  std::vector<CacheLevel> caches;  // by level, then kind
  std::vector<NetDevice> net_devices;
  bool operator==(const MachineInfo&) const = default;

  // Several lines, indented by `indent`, for people.
  std::string describe(const std::string& indent = "") const;
};

// This host, read through hwloc (I/O discovery on). Throws IoError when
// hwloc cannot load the topology.
MachineInfo detect_machine();

void to_json(nlohmann::json& j, const MachineInfo& m);
void from_json(const nlohmann::json& j, MachineInfo& m);  // throws UsageError when malformed

}  // namespace chorus::topology
