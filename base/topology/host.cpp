#include "base/topology/host.hpp"

#include <fmt/format.h>
#include <hwloc.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "base/core/error.hpp"

namespace chorus::topology {
namespace {

std::string namespace_inode(const char* kind) {
  struct stat st {};
  if (stat(fmt::format("/proc/self/ns/{}", kind).c_str(), &st) != 0) return "?";
  return std::to_string(static_cast<unsigned long long>(st.st_ino));
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.empty() ? "?" : id;
}

struct BitmapFree {
  void operator()(hwloc_bitmap_s* b) const { hwloc_bitmap_free(b); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapFree>;

Bitmap new_bitmap() {
  Bitmap b(hwloc_bitmap_alloc());
  if (!b) throw std::bad_alloc();
  return b;
}

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

}  // namespace

std::string detect_host_identity(const Config& config) {
  if (!config.host_id.empty()) return "CHORUS_HOST_ID=" + config.host_id;
  return fmt::format("{} boot={} net={} mnt={} ipc={}", hostname(), boot_id(),
                     namespace_inode("net"), namespace_inode("mnt"), namespace_inode("ipc"));
}

std::string my_cpu_list() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "";
  Bitmap cpus = new_bitmap();
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) hwloc_bitmap_set(cpus.get(), static_cast<unsigned>(cpu));
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, cpus.get()) < 0 || !text) throw std::bad_alloc();
  std::string list(text);
  std::free(text);
  return list;
}

int union_cpu_count(const std::vector<std::string>& cpu_lists) {
  Bitmap all = new_bitmap();
  Bitmap one = new_bitmap();
  for (const std::string& list : cpu_lists) {
    if (hwloc_bitmap_list_sscanf(one.get(), list.c_str()) != 0)
      throw UsageError(fmt::format("'{}' is not a CPU list", list));
    hwloc_bitmap_or(all.get(), all.get(), one.get());
  }
  return hwloc_bitmap_weight(all.get());
}

int HostMap::cpus_on_host_of(int of) const {
  std::vector<std::string> here;
  for (int r = 0; r < size(); ++r) {
    if (!same_host(r, of)) continue;
    if (static_cast<std::size_t>(r) >= cpus_of_rank.size() || cpus_of_rank[r].empty())
      return online_cores();
    here.push_back(cpus_of_rank[r]);
  }
  const int count = union_cpu_count(here);
  return count > 0 ? count : online_cores();
}

int HostMap::ranks_on_my_host() const {
  return ranks_on_host_of(rank);
}

int HostMap::ranks_on_host_of(int r) const {
  return static_cast<int>(std::count(host_of_rank.begin(), host_of_rank.end(), host_of_rank[r]));
}

bool HostMap::all_on_one_host() const {
  return ranks_on_my_host() == size();
}

int HostMap::host_count() const {
  return static_cast<int>(std::set<std::string>(host_of_rank.begin(), host_of_rank.end()).size());
}

bool HostMap::rdma_between(int a, int b) const {
  const auto n = static_cast<int>(rdma_of_rank.size());
  return a < n && b < n && rdma_of_rank[a] && rdma_of_rank[b];
}

bool has_rdma_devices() {
  std::error_code ec;
  std::filesystem::directory_iterator devices("/sys/class/infiniband", ec);
  return !ec && devices != std::filesystem::directory_iterator();
}

HostMap exchange_host_map(Store& store, const std::string& key_prefix, int rank, int size,
                          const std::string& my_identity, const Deadline& deadline,
                          const std::string& my_cpus, bool my_rdma) {
  store.set(fmt::format("{}host/{}", key_prefix, rank), my_identity);
  // The RDMA flag rides with the CPU list ("1 0-3"): one more key per rank
  // would be one more store round trip per rank and peer at init.
  store.set(fmt::format("{}cpus/{}", key_prefix, rank),
            fmt::format("{} {}", my_rdma ? 1 : 0, my_cpus));
  HostMap map;
  map.rank = rank;
  for (int r = 0; r < size; ++r) {
    map.host_of_rank.push_back(
        r == rank ? my_identity : store.get(fmt::format("{}host/{}", key_prefix, r), deadline));
    if (r == rank) {
      map.cpus_of_rank.push_back(my_cpus);
      map.rdma_of_rank.push_back(my_rdma);
      continue;
    }
    const std::string cpus = store.get(fmt::format("{}cpus/{}", key_prefix, r), deadline);
    map.rdma_of_rank.push_back(cpus.rfind("1 ", 0) == 0);
    map.cpus_of_rank.push_back(cpus.size() >= 2 ? cpus.substr(2) : std::string());
  }
  return map;
}

}  // namespace chorus::topology
