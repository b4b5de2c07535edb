// Host identity: which ranks may share memory. Two ranks get the same
// identity only if they run under one kernel (boot id), in one network
// namespace (simulated hosts are network namespaces) and see the same
// /dev/shm (mount namespace) and System V IPC (IPC namespace). Never guessed
// from addresses. CHORUS_HOST_ID overrides it (containers, tests).
#pragma once

#include <string>
#include <vector>

#include "base/bootstrap/store.hpp"
#include "base/core/config.hpp"

namespace chorus::topology {

// e.g. "myhost boot=5f0c... net=4026531840 mnt=4026531841 ipc=4026531839"
std::string detect_host_identity(const Config& config);

// The CPUs this process may run on (its affinity), as a list: "0-3,8".
std::string my_cpu_list();
// How many CPUs the union of these lists holds (hwloc's list syntax); throws
// UsageError on a malformed list.
int union_cpu_count(const std::vector<std::string>& cpu_lists);

// Whether this host has RDMA devices (InfiniBand, RoCE, iWARP: entries in
// /sys/class/infiniband), the links UCX reaches that TCP does not.
bool has_rdma_devices();

// Where every rank of a communicator runs, exchanged through the store.
struct HostMap {
  std::vector<std::string> host_of_rank;
  std::vector<std::string> cpus_of_rank;  // my_cpu_list() of each rank; empty: unknown
  std::vector<char> rdma_of_rank;         // has_rdma_devices() of each rank; empty: none
  int rank = 0;

  int size() const { return static_cast<int>(host_of_rank.size()); }
  bool same_host(int a, int b) const { return host_of_rank[a] == host_of_rank[b]; }
  int ranks_on_my_host() const;
  // The CPUs the ranks on this host may use between them (the union of their
  // affinities; online_cores() when unknown). Ranks bound one per CPU then fit
  // the host, where each one's own affinity (one CPU) would say they outnumber it.
  int cpus_on_my_host() const { return cpus_on_host_of(rank); }
  // The same for the host of rank r.
  int cpus_on_host_of(int r) const;
  // The ranks on the host of rank r.
  int ranks_on_host_of(int r) const;
  bool all_on_one_host() const;
  int host_count() const;
  // Whether the hosts of ranks a and b both have RDMA devices.
  bool rdma_between(int a, int b) const;
};

// Collective: every rank publishes its identity and CPU list under key_prefix
// and reads all.
HostMap exchange_host_map(Store& store, const std::string& key_prefix, int rank, int size,
                          const std::string& my_identity, const Deadline& deadline,
                          const std::string& my_cpus = my_cpu_list(),
                          bool my_rdma = has_rdma_devices());

}  // namespace chorus::topology
