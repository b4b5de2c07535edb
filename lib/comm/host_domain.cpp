#include "lib/comm/host_domain.hpp"

#include <algorithm>

namespace chorus {

shm::Layout host_shm_layout(const Config& config, int ranks, int cores) {
  shm::Layout layout;
  layout.ranks = ranks;
  std::size_t piece = config.shm_chunk_bytes;
  if (piece == 0) {
    // A round's slot (ranks x piece) of 256K stays in cache. With more ranks
    // than cores every round has every rank scheduled a few times: 512K
    // (measured at 8 ranks on 2 cores: 2.4-2.8 GB/s at 16M against 1.8-2.1
    // with 1M slots; 4 ranks within noise).
    std::size_t slot = ranks > cores ? (512 << 10) : (256 << 10);
    piece = std::max<std::size_t>(16 << 10, slot / static_cast<std::size_t>(ranks) / 4096 * 4096);
  }
  layout.piece_bytes = piece;
  layout.small_bytes = config.shm_small_max;
  return layout;
}

std::unique_ptr<shm::Domain> join_host_domain(Store& store, const Config& config,
                                              const topology::HostMap& hosts,
                                              const std::vector<int>& members, int cpus_on_host,
                                              const std::string& job_token,
                                              const std::string& key_prefix,
                                              const Deadline& deadline) {
  int here = 0, index = 0;
  shm::Domain::Options o;
  for (int r = 0; r < hosts.size(); ++r) {
    if (!hosts.same_host(r, hosts.rank)) continue;
    if (r == hosts.rank) index = here;
    o.job_ranks.push_back(members[static_cast<std::size_t>(r)]);
    ++here;
  }
  o.rank = index;
  o.layout = host_shm_layout(config, here, cpus_on_host);
  // Spinning (by yielding when ranks outnumber cores, which lets the awaited
  // rank run) beats a futex wake-up on every shared-memory wait.
  o.spin = wait_spin(config, here > cpus_on_host);
  o.name_prefix = shm::segment_name_prefix(job_token);
  o.key_prefix = key_prefix;
  o.deadline = deadline;
  return shm::Domain::join(store, o);
}

}  // namespace chorus
