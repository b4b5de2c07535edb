#include "lib/comm/host_domain.hpp"

#include <algorithm>

namespace chorus {

shm::Layout host_shm_layout(const Config& config, int ranks, int cores) {
  shm::Layout layout;
  layout.ranks = ranks;
  std::size_t piece = config.shm_chunk_bytes;
  std::size_t largest = piece;  // a chunk the user set is the only piece
  if (piece == 0) {
    const auto n = static_cast<std::size_t>(ranks);
    // A round's slot (ranks x piece) of 256K stays in cache. With more ranks
    // than cores every round has every rank scheduled a few times: 512K
    // (measured at 8 ranks on 2 cores: 2.4-2.8 GB/s at 16M against 1.8-2.1
    // with 1M slots; 4 ranks within noise).
    std::size_t slot = ranks > cores ? (512 << 10) : (256 << 10);
    piece = std::max<std::size_t>(16 << 10, slot / n / 4096 * 4096);
    largest = piece;
    if (ranks > cores) {
      // Beside CPU-bound work each round waits for every rank's next turn on
      // a core, so a large allreduce takes pieces up to a 2M slot (as long as
      // kMinRounds rounds remain, so the pipeline stays full on idle cores),
      // with the segment (ranks x slots x slot) kept within 32 MiB. Measured,
      // 4 ranks on 2 cores beside two spinning threads, 8 MiB: 10.2-11.5 ms
      // with 512K pieces, 13.4-27.5 ms with 128K; 32 MiB: 39-45 against
      // 89-109 ms; idle, 8 and 32 MiB within the runs' spread of each other.
      const std::size_t cap = (32u << 20) / (n * n * static_cast<std::size_t>(layout.slots));
      largest = std::max(piece, std::min<std::size_t>((2u << 20) / n, cap) / 4096 * 4096);
    }
  }
  layout.piece_bytes = largest;
  if (largest > piece) layout.base_piece_bytes = piece;
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
