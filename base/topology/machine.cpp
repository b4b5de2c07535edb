#include "base/topology/machine.hpp"

#include <fmt/format.h>
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <tuple>

#include "base/core/error.hpp"

namespace chorus::topology {
namespace {

struct TopologyFree {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyFree>;

// hwloc loads its plugins (I/O discovery) with the first topology and
// unloads them with the last one; what their libraries allocated for good
// (libpciaccess) then shows as leaks of an unloaded module. One topology
// kept for the life of the process keeps them loaded.
// (volatile: the compiler must keep the pointer, the leak checker's root.)
hwloc_topology_t volatile kept_topology = nullptr;

void keep_plugins_loaded() {
  static std::once_flag once;
  std::call_once(once, [] {
    hwloc_topology_t t = nullptr;
    if (hwloc_topology_init(&t) == 0) kept_topology = t;
  });
}

Topology load_topology() {
  keep_plugins_loaded();
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) throw IoError(CHORUS_ERR_IO, "hwloc: cannot start");
  Topology topo(raw);
  // Important I/O objects only: PCI devices with an OS device (NICs, HCAs,
  // disks), not every bridge; the network devices are what we want.
  // The whole host, not only the CPUs this process's cgroup may use: the
  // ranks of a job on it may have different ones.
  // No OpenCL or OpenGL discovery: Chorus reads neither, the OpenCL one starts whatever ICDs a host
  // has installed on the calling thread, and the thread-local block of the ICD loader it touches is
  // one that GCC 12's leak checker misreads (a bogus range) and crashes on at exit.
  for (const char* unused : {"opencl", "gl"})
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, unused);
  if (hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0 ||
      hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) != 0 ||
      hwloc_topology_load(raw) != 0)
    throw IoError(CHORUS_ERR_IO, "hwloc: cannot load this host's topology");
  return topo;
}

const char* cache_kind(hwloc_obj_cache_type_t type) {
  switch (type) {
    case HWLOC_OBJ_CACHE_DATA:
      return "data";
    case HWLOC_OBJ_CACHE_INSTRUCTION:
      return "instruction";
    default:
      return "unified";
  }
}

std::vector<CacheLevel> caches_of(hwloc_topology_t topo) {
  // Keyed by (level, kind): the caches of one level and kind are alike on
  // every machine we know of; a mixed one (big.LITTLE) reports the largest.
  std::map<std::pair<int, std::string>, CacheLevel> levels;
  for (int d = 0; d < hwloc_topology_get_depth(topo); ++d) {
    const hwloc_obj_type_t type = hwloc_get_depth_type(topo, d);
    if (!hwloc_obj_type_is_cache(type)) continue;
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_depth(topo, d, o));) {
      const auto& a = o->attr->cache;
      CacheLevel& c = levels[{static_cast<int>(a.depth), cache_kind(a.type)}];
      c.level = static_cast<int>(a.depth);
      c.kind = cache_kind(a.type);
      c.size_bytes = std::max<uint64_t>(c.size_bytes, a.size);
      c.count += 1;
      c.cores_per_cache = std::max(c.cores_per_cache, hwloc_get_nbobjs_inside_cpuset_by_type(
                                                          topo, o->cpuset, HWLOC_OBJ_CORE));
    }
  }
  std::vector<CacheLevel> out;
  for (auto& [key, c] : levels) out.push_back(c);
  return out;
}

std::string pci_address(hwloc_obj_t osdev) {
  for (hwloc_obj_t p = osdev->parent; p; p = p->parent)
    if (p->type == HWLOC_OBJ_PCI_DEVICE) {
      const auto& a = p->attr->pcidev;
      return fmt::format("{:04x}:{:02x}:{:02x}.{:01x}", a.domain, a.bus, a.dev, a.func);
    }
  return "";
}

std::vector<NetDevice> net_devices_of(hwloc_topology_t topo) {
  std::vector<NetDevice> out;
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(topo, o));) {
    const auto type = o->attr->osdev.type;
    if (type != HWLOC_OBJ_OSDEV_NETWORK && type != HWLOC_OBJ_OSDEV_OPENFABRICS) continue;
    out.push_back({o->name ? o->name : "?",
                   type == HWLOC_OBJ_OSDEV_NETWORK ? "network" : "openfabrics", false,
                   pci_address(o)});
  }
  // hwloc leaves out software devices unless told through its environment
  // (HWLOC_VIRTUAL_LINUX_OSDEV), which a library must not set for its
  // host process; /sys/class/net of this network namespace has them.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/net", ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "lo") continue;  // every host has one; no other host is reached through it
    const std::string target = std::filesystem::read_symlink(entry.path(), ec).string();
    if (ec || target.find("/virtual/") == std::string::npos) continue;
    out.push_back({name, "network", true, ""});
  }
  std::sort(out.begin(), out.end(), [](const NetDevice& a, const NetDevice& b) {
    return std::tie(a.kind, a.name) < std::tie(b.kind, b.name);
  });
  return out;
}

std::string bytes_text(uint64_t bytes) {
  if (bytes >= (uint64_t(1) << 30) && bytes % (uint64_t(1) << 30) == 0)
    return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (uint64_t(1) << 30))
    return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1 << 30));
  if (bytes >= (1 << 20)) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1 << 10)) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

}  // namespace

MachineInfo detect_machine() {
  Topology topo = load_topology();
  hwloc_topology_t t = topo.get();
  MachineInfo m;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) m.hostname = name;
  m.packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  m.numa_nodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  m.cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  m.pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, o));)
    m.numa.push_back({o->os_index, o->attr ? o->attr->numanode.local_memory : 0});
  m.caches = caches_of(t);
  m.net_devices = net_devices_of(t);
  return m;
}

std::string MachineInfo::describe(const std::string& indent) const {
  std::string out =
      fmt::format("{}host {}: {} package(s), {} NUMA node(s), {} core(s), {} hardware thread(s)\n",
                  indent, hostname, packages, numa_nodes, cores, pus);
  for (const NumaNode& n : numa)
    out += fmt::format("{}  NUMA node {}: {}\n", indent, n.os_index,
                       n.memory_bytes ? bytes_text(n.memory_bytes) : "memory unknown");
  for (const CacheLevel& c : caches)
    out += fmt::format("{}  L{} {}: {} x {}, each shared by {} core(s)\n", indent, c.level, c.kind,
                       c.count, bytes_text(c.size_bytes), c.cores_per_cache);
  if (net_devices.empty()) out += fmt::format("{}  network devices: none\n", indent);
  for (const NetDevice& d : net_devices)
    out += fmt::format("{}  {} device {}{}{}\n", indent, d.kind, d.name,
                       d.bus.empty() ? "" : fmt::format(" (PCI {})", d.bus),
                       d.is_virtual ? " (virtual)" : "");
  return out;
}

void to_json(nlohmann::json& j, const MachineInfo& m) {
  using nlohmann::json;
  json numa = json::array(), caches = json::array(), devices = json::array();
  for (const NumaNode& n : m.numa)
    numa.push_back({{"os_index", n.os_index}, {"memory_bytes", n.memory_bytes}});
  for (const CacheLevel& c : m.caches)
    caches.push_back({{"level", c.level},
                      {"kind", c.kind},
                      {"size_bytes", c.size_bytes},
                      {"count", c.count},
                      {"cores_per_cache", c.cores_per_cache}});
  for (const NetDevice& d : m.net_devices)
    devices.push_back(
        {{"name", d.name}, {"kind", d.kind}, {"virtual", d.is_virtual}, {"bus", d.bus}});
  j = {{"hostname", m.hostname}, {"packages", m.packages}, {"numa_nodes", m.numa_nodes},
       {"cores", m.cores},       {"pus", m.pus},           {"numa", numa},
       {"caches", caches},       {"net_devices", devices}};
}

void from_json(const nlohmann::json& j, MachineInfo& m) {
  try {
    m = MachineInfo{};
    j.at("hostname").get_to(m.hostname);
    j.at("packages").get_to(m.packages);
    j.at("numa_nodes").get_to(m.numa_nodes);
    j.at("cores").get_to(m.cores);
    j.at("pus").get_to(m.pus);
    for (const auto& n : j.at("numa"))
      m.numa.push_back({n.at("os_index").get<unsigned>(), n.at("memory_bytes").get<uint64_t>()});
    for (const auto& c : j.at("caches"))
      m.caches.push_back({c.at("level").get<int>(), c.at("kind").get<std::string>(),
                          c.at("size_bytes").get<uint64_t>(), c.at("count").get<int>(),
                          c.at("cores_per_cache").get<int>()});
    for (const auto& d : j.at("net_devices"))
      m.net_devices.push_back({d.at("name").get<std::string>(), d.at("kind").get<std::string>(),
                               d.at("virtual").get<bool>(), d.at("bus").get<std::string>()});
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(fmt::format("machine description: {}", e.what()));
  }
}

}  // namespace chorus::topology
