// A communicator's construction: its teams (world, host, host leaders), its
// cost model, the link between hosts (measured once per link) and the
// hierarchy of teams when it spans hosts. The calls are in communicator.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "base/core/error.hpp"
#include "collectives/patterns/hierarchy.hpp"
#include "collectives/shm/domain.hpp"
#include "collectives/tuner/tuning_file.hpp"
#include "lib/comm/communicator.hpp"
#include "lib/comm/host_domain.hpp"
#include "lib/comm/link_probe.hpp"

namespace chorus {
namespace {

std::chrono::nanoseconds seconds(double s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

// The ranks of `hosts` that share this rank's host, in rank order.
std::vector<int> ranks_on_my_host(const topology::HostMap& hosts) {
  std::vector<int> out;
  for (int r = 0; r < hosts.size(); ++r)
    if (hosts.same_host(r, hosts.rank)) out.push_back(r);
  return out;
}

// The lowest rank of every host, in rank order.
std::vector<int> host_leaders(const topology::HostMap& hosts) {
  std::vector<int> out;
  for (int r = 0; r < hosts.size(); ++r) {
    bool first = true;
    for (int q = 0; q < r && first; ++q) first = !hosts.same_host(q, r);
    if (first) out.push_back(r);
  }
  return out;
}

// The transport ranks of `indices` (ranks of a communicator with `members`).
std::vector<int> members_of(const std::vector<int>& members, const std::vector<int>& indices) {
  std::vector<int> out;
  for (int i : indices) out.push_back(members[static_cast<std::size_t>(i)]);
  return out;
}

// The cost model of the host whose ranks most outnumber its CPUs. Every
// rank must choose the same algorithm for a call, so the model of a world
// that spans hosts must not depend on which host a rank is on.
CostModel busiest_host_model(const topology::HostMap& hosts, int ranks_here, int cpus_here) {
  if (hosts.all_on_one_host()) return CostModel::defaults(ranks_here, cpus_here);
  int ranks = 0, cpus = 1;
  for (int r : host_leaders(hosts)) {
    const int n = hosts.ranks_on_host_of(r), c = hosts.cpus_on_host_of(r);
    if (ranks == 0 || n * cpus > ranks * c) {
      ranks = n;
      cpus = c;
    }
  }
  return CostModel::defaults(ranks, cpus);
}

}  // namespace

Communicator::Communicator(CommSetup setup)
    : link_(std::move(setup.link)),
      config_(std::move(setup.config)),
      hosts_(std::move(setup.hosts)),
      id_(setup.id),
      name_(std::move(setup.name)),
      host_shm_(std::move(setup.host_shm)),
      hosts_share_memory_(setup.hosts_share_memory),
      algo_override_(user_choices(config_)),
      default_timeout_(seconds(config_.timeout_s)) {
  Transport& t = *link_->transport;
  CHORUS_CHECK(id_ <= kMaxCommId, "communicator id {} is beyond {}", id_, kMaxCommId);
  const std::vector<int> on_host = ranks_on_my_host(hosts_);
  const bool all_here = static_cast<int>(on_host.size()) == hosts_.size();
  world_ =
      Team::of(t, setup.members, team_tag(id_, 1), all_here ? host_shm_.get() : nullptr, "world");
  host_ =
      Team::of(t, members_of(setup.members, on_host), team_tag(id_, 2), host_shm_.get(), "host");
  const std::vector<int> leaders = host_leaders(hosts_);
  if (std::find(leaders.begin(), leaders.end(), hosts_.rank) != leaders.end())
    leaders_ =
        Team::of(t, members_of(setup.members, leaders), team_tag(id_, 3), nullptr, "leaders");
  CHORUS_CHECK(world_.index == hosts_.rank, "rank {} in the host map is rank {} of the world",
               hosts_.rank, world_.index);
  config_.spin_us = resolve_spin_us(config_.spin_us);
  const int cpus = setup.cpus_on_host > 0 ? setup.cpus_on_host : online_cores();
  cost_model_ = busiest_host_model(hosts_, static_cast<int>(on_host.size()), cpus);
  spin_ = chorus::wait_spin(config_, cost_model_.oversubscribed);
  network_ = link_network();
  ring_round_bytes_ = config_.ring_round_bytes.value_or(all_here ? kRingRoundBytes : 0);
  cost_model_.set_network(network_.alpha_us, network_.gbps);
  if (!all_here) {
    patterns::HostGroups groups = patterns::group_by_host(hosts_.host_of_rank);
    // The layout the widest host's domain has: what the estimates of the
    // stages within hosts read, the same on every rank.
    std::optional<shm::Layout> widest_layout;
    const std::vector<int>* widest = &groups.hosts.front();
    for (const auto& h : groups.hosts)
      if (h.size() > widest->size()) widest = &h;
    if (hosts_share_memory_ && widest->size() >= 2)
      widest_layout = host_shm_layout(config_, static_cast<int>(widest->size()),
                                      hosts_.cpus_on_host_of(widest->front()));
    hierarchy_ = TeamHierarchy::attach(
        world_, host_, std::move(groups),
        HierarchyTags{team_tag(id_, 4), team_tag(id_, 5), team_tag(id_, 6), team_tag(id_, 7)},
        algo_override_, cost_model_, widest_layout ? &*widest_layout : nullptr);
  }
  for (auto& k : cache_key_) k.store(kNoChoice);
  progress_ = &t.board().slot(world_.tag);
  link_->users.fetch_add(1);
  worker_ = std::thread([this] { worker_loop(); });
}

// The first communicator of a link measures (or reads from the config) the
// link between hosts; the others, split from it, inherit that: a subset of
// the ranks sees no new link, and a probe per split would cost its time again.
NetworkLink Communicator::link_network() {
  {
    std::lock_guard lock(link_->mu);
    if (link_->network) return *link_->network;
  }
  // A tuning file's link (chorus-tune wrote what its job measured) stands in
  // for the probe, unless CHORUS_NET_* were set, which win over both.
  const TuningTable* tuned = algo_override_.tuning();
  if (tuned && !config_.net_given && tuned->links.count("other_host")) {
    const TunedLink& l = tuned->links.at("other_host");
    apply_network(*link_, l.alpha_us, l.gbps, fmt::format("tuning file {}", tuned->path));
    std::lock_guard lock(link_->mu);
    return *link_->network;
  }
  std::optional<Team> probe;
  if (leaders_) {
    probe = *leaders_;
    probe->tag = team_tag(id_, 8);
    probe->name = "link probe";
  }
  NetworkLink n = resolve_network(config_, hosts_, probe ? &*probe : nullptr, *link_->transport,
                                  *link_->store, link_->store_prefix, link_->probe_leftovers);
  std::lock_guard lock(link_->mu);
  link_->network = n;
  return n;
}

}  // namespace chorus
