#include "lib/topology/host.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>

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

int HostMap::ranks_on_my_host() const {
  return static_cast<int>(std::count(host_of_rank.begin(), host_of_rank.end(), host_of_rank[rank]));
}

bool HostMap::all_on_one_host() const {
  return ranks_on_my_host() == size();
}

int HostMap::host_count() const {
  return static_cast<int>(std::set<std::string>(host_of_rank.begin(), host_of_rank.end()).size());
}

HostMap exchange_host_map(Store& store, const std::string& key_prefix, int rank, int size,
                          const std::string& my_identity, const Deadline& deadline) {
  store.set(fmt::format("{}host/{}", key_prefix, rank), my_identity);
  HostMap map;
  map.rank = rank;
  for (int r = 0; r < size; ++r)
    map.host_of_rank.push_back(
        r == rank ? my_identity : store.get(fmt::format("{}host/{}", key_prefix, r), deadline));
  return map;
}

}  // namespace chorus::topology
