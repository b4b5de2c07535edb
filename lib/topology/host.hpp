// Host identity: which ranks may share memory. Two ranks get the same
// identity only if they run under one kernel (boot id), in one network
// namespace (simulated hosts are network namespaces) and see the same
// /dev/shm (mount namespace) and System V IPC (IPC namespace). Never guessed
// from addresses. CHORUS_HOST_ID overrides it (containers, tests).
#pragma once

#include <string>
#include <vector>

#include "lib/bootstrap/store.hpp"
#include "lib/core/config.hpp"

namespace chorus::topology {

// e.g. "myhost boot=5f0c... net=4026531840 mnt=4026531841 ipc=4026531839"
std::string detect_host_identity(const Config& config);

// Where every rank of a communicator runs, exchanged through the store.
struct HostMap {
  std::vector<std::string> host_of_rank;
  int rank = 0;

  int size() const { return static_cast<int>(host_of_rank.size()); }
  bool same_host(int a, int b) const { return host_of_rank[a] == host_of_rank[b]; }
  int ranks_on_my_host() const;
  bool all_on_one_host() const;
  int host_count() const;
};

// Collective: every rank publishes its identity under key_prefix and reads all.
HostMap exchange_host_map(Store& store, const std::string& key_prefix, int rank, int size,
                          const std::string& my_identity, const Deadline& deadline);

}  // namespace chorus::topology
