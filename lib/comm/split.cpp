// chorus_comm_split: ranks of a communicator that pass the same color form a
// new one, ordered by (key, rank in the parent), as MPI_Comm_split and
// ncclCommSplit do.
//
// Steps (collective over the parent, in its call order):
//   1. allgather of (color, key, proposed id) over the parent: one ordinary
//      collective, so a rank that splits while another calls something else
//      fails as a mismatch.
//   2. Each rank picks its color's members, sorted by (key, parent rank); the
//      child's id is the largest id its members proposed (link.hpp), and
//      every member's link moves past it.
//   3. The child's host map is the parent's, restricted; its ranks on this
//      host set up their own shared-memory domain (the store carries the
//      segment's name, under the child's id and the host's first rank).
// No connection is made: the child reaches its ranks over the parent's link.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "lib/comm/communicator.hpp"
#include "lib/comm/host_domain.hpp"

namespace chorus {

// The exchange of step 1: (color, key, proposed id) of every rank.
struct Communicator::SplitExchange {
  int64_t mine[3] = {};
  std::vector<int64_t> all;
  CollectiveCall call() {
    CollectiveCall exchange;
    exchange.kind = CollectiveKind::allgather;
    exchange.send = mine;
    exchange.recv = all.data();
    exchange.count = 3;
    exchange.dtype = DataType::i64;
    return exchange;
  }
};

std::shared_ptr<Communicator::SplitExchange> Communicator::split_exchange_start(int color,
                                                                                int key) {
  auto exchange = std::make_shared<SplitExchange>();
  {
    // The proposal is taken: a split started before this one finishes
    // proposes a larger id here, so its child's id (the members' largest
    // proposal) is larger too.
    std::lock_guard lock(link_->mu);
    exchange->mine[2] = link_->next_comm_id++;
  }
  exchange->mine[0] = color < 0 ? -1 : color;
  exchange->mine[1] = key;
  exchange->all.resize(static_cast<std::size_t>(3 * size()));
  return exchange;
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, const Deadline& deadline) {
  auto exchange = split_exchange_start(color, key);
  run(exchange->call(), deadline);
  return split_finish(exchange->all, color, key, deadline);
}

std::function<std::unique_ptr<Communicator>(const Deadline&)> Communicator::start_split(int color,
                                                                                        int key) {
  auto exchange = split_exchange_start(color, key);
  WorkPtr work = submit(exchange->call());
  const Spin spin = wait_spin();
  return [this, exchange, work, color, key, spin](const Deadline& deadline) {
    if (!work->completion().wait(deadline, spin))
      throw IoError(CHORUS_ERR_TIMEOUT,
                    fmt::format("split: {} did not finish in time", describe(work->signature())));
    work->completion().rethrow_if_failed();
    return split_finish(exchange->all, color, key, deadline);
  };
}

std::unique_ptr<Communicator> Communicator::split_finish(const std::vector<int64_t>& all, int color,
                                                         int key, const Deadline& deadline) {
  const int n = size();
  if (color < 0) return nullptr;

  std::vector<int> parent_ranks;  // the child's ranks, as ranks of this communicator
  for (int r = 0; r < n; ++r)
    if (all[static_cast<std::size_t>(3 * r)] == color) parent_ranks.push_back(r);
  std::stable_sort(parent_ranks.begin(), parent_ranks.end(), [&](int a, int b) {
    return all[static_cast<std::size_t>(3 * a + 1)] < all[static_cast<std::size_t>(3 * b + 1)];
  });
  int64_t id = 0;
  for (int r : parent_ranks) id = std::max(id, all[static_cast<std::size_t>(3 * r + 2)]);
  if (id > static_cast<int64_t>(kMaxCommId))
    throw UsageError(CHORUS_ERR_UNSUPPORTED,
                     fmt::format("split: a rank already took part in {} communicators (at most {})",
                                 id, kMaxCommId));
  {
    std::lock_guard lock(link_->mu);
    link_->next_comm_id = std::max(link_->next_comm_id, static_cast<uint32_t>(id) + 1);
  }

  CommSetup setup;
  setup.link = link_;
  setup.config = config_;
  setup.id = static_cast<uint32_t>(id);
  setup.name = fmt::format("{}.{}", name_, id);
  for (std::size_t i = 0; i < parent_ranks.size(); ++i) {
    const int p = parent_ranks[i];
    setup.members.push_back(world_.member(p));
    setup.hosts.host_of_rank.push_back(hosts_.host_of_rank[static_cast<std::size_t>(p)]);
    if (!hosts_.cpus_of_rank.empty())
      setup.hosts.cpus_of_rank.push_back(hosts_.cpus_of_rank[static_cast<std::size_t>(p)]);
    if (p == rank()) setup.hosts.rank = static_cast<int>(i);
  }
  setup.cpus_on_host = setup.hosts.cpus_on_my_host();
  setup.hosts_share_memory = hosts_share_memory_;
  // Shared memory for the child's ranks on this host where the parent's had it.
  if (host_shm_ && setup.hosts.ranks_on_my_host() >= 2) {
    // Children of one split may share an id (they share no rank): the
    // store keys are told apart by the job rank of their first rank here.
    int first_here = setup.members[static_cast<std::size_t>(setup.hosts.rank)];
    for (int r = 0; r < setup.hosts.size(); ++r)
      if (setup.hosts.same_host(r, setup.hosts.rank)) {
        first_here = setup.members[static_cast<std::size_t>(r)];
        break;
      }
    setup.host_shm = join_host_domain(
        *link_->store, config_, setup.hosts, setup.members, setup.cpus_on_host, link_->job_token,
        fmt::format("{}split{}/host{}/", link_->store_prefix, id, first_here), deadline);
  }
  logger("comm").debug("rank {} of {}: split color {} key {} -> rank {} of {} ({}, id {})", rank(),
                       n, color, key, setup.hosts.rank, setup.hosts.size(), setup.name, id);
  return std::make_unique<Communicator>(std::move(setup));
}

}  // namespace chorus
