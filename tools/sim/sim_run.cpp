#include "tools/sim/sim_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "base/core/error.hpp"
#include "base/core/scratch.hpp"
#include "collectives/call.hpp"
#include "collectives/context.hpp"
#include "collectives/patterns/hierarchy.hpp"
#include "collectives/team_hierarchy.hpp"
#include "collectives/tuner/selection.hpp"
#include "tools/sim/sim_transport.hpp"

namespace chorus::sim {

std::vector<int> place(int ranks, int hosts, const std::string& placement) {
  CHORUS_CHECK(ranks > 0 && hosts > 0 && hosts <= ranks, "{} ranks on {} hosts", ranks, hosts);
  std::vector<int> host_of(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    host_of[static_cast<std::size_t>(r)] =
        placement == "node" ? r % hosts : static_cast<int>(static_cast<long>(r) * hosts / ranks);
  return host_of;
}

const AlgoTime* SizeResult::best() const {
  const AlgoTime* b = nullptr;
  for (const auto& a : algos)
    if (a.refusal.empty() && a.error.empty() && (!b || a.time_us < b->time_us)) b = &a;
  return b;
}

const AlgoTime* SizeResult::of(const AlgorithmSpec* spec) const {
  for (const auto& a : algos)
    if (a.spec == spec) return &a;
  return nullptr;
}

namespace {

constexpr std::size_t kElem = sizeof(float);

std::size_t scale_for(std::size_t bytes, std::size_t max_real) {
  std::size_t k = 1;
  while (bytes / k > std::max(max_real, kElem)) k *= 2;
  return k;
}

// What every rank keeps across the calls of a sweep.
struct Rank {
  Rank(std::shared_ptr<SimFabric> fabric, int r, const patterns::HostGroups* groups,
       const CostModel& base)
      : transport(std::move(fabric), r), world(Team::whole(transport, 1)), model(base) {
    if (!groups) return;
    host = Team::of(transport, groups->hosts[static_cast<std::size_t>(groups->host_of[r])], 2,
                    nullptr, "host");
    hierarchy =
        TeamHierarchy::attach(world, *host, *groups, HierarchyTags{4, 5, 6, 7}, user, model);
  }
  SimTransport transport;
  Team world;
  CostModel model;  // the hierarchy's: scaled with the payload while a call runs
  AlgoOverride user;
  std::optional<Team> host;
  std::unique_ptr<TeamHierarchy> hierarchy;
  ScratchPool scratch;
};

struct Job {
  std::size_t size = 0;  // index into sizes
  std::size_t algo = 0;  // index into algos
};

}  // namespace

std::vector<SizeResult> simulate_allreduce(const World& w, const std::vector<std::size_t>& sizes,
                                           const std::vector<const AlgorithmSpec*>& algos) {
  const int n = static_cast<int>(w.host_of_rank.size());
  std::vector<std::string> names;
  for (int h : w.host_of_rank) names.push_back(std::to_string(h));
  const patterns::HostGroups groups = patterns::group_by_host(names);
  int widest = 0;
  for (const auto& h : groups.hosts) widest = std::max(widest, static_cast<int>(h.size()));
  // As the communicator's busiest_host_model, every host having the same
  // cores, with the links' parameters the model would have measured.
  CostModel base = CostModel::defaults(widest, w.cores_per_host ? w.cores_per_host : widest);
  base.alpha_us = w.net.intra.alpha_us;
  base.us_per_byte = w.net.intra.us_per_byte;
  base.net_alpha_us = w.net.inter.alpha_us;
  base.net_us_per_byte = w.net.inter.us_per_byte;
  base.reduce_us_per_byte = w.net.reduce_us_per_byte;

  std::vector<SizeResult> results(sizes.size());
  std::vector<Job> jobs;
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    results[s].bytes = sizes[s];
    results[s].scale = scale_for(sizes[s], w.max_real_bytes);
    results[s].algos.resize(algos.size());
    for (std::size_t a = 0; a < algos.size(); ++a) {
      results[s].algos[a].spec = algos[a];
      jobs.push_back({s, a});
    }
  }
  auto fabric = std::make_shared<SimFabric>(w.net, w.host_of_rank);
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::size_t next = 0;  // the job the ranks run after the barrier
  auto between = [&]() noexcept {
    if (next > 0) {  // the job just run
      const Job& j = jobs[next - 1];
      AlgoTime& t = results[j.size].algos[j.algo];
      t.time_us = fabric->makespan();
      for (auto& e : errors)
        if (!e.empty() && t.error.empty()) t.error = e;
    }
    for (auto& e : errors) e.clear();
    if (next < jobs.size()) fabric->reset(static_cast<double>(results[jobs[next].size].scale));
    ++next;
  };
  std::barrier sync(n, between);

  auto body = [&](int r) {
    Rank me(fabric, r, groups.host_count() > 1 ? &groups : nullptr, base);
    const std::size_t elems = std::max(w.max_real_bytes, kElem) / kElem + 1;
    std::vector<float> send(elems, 1.0f), recv(elems, 0.0f);
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      sync.arrive_and_wait();
      const Job& j = jobs[i];
      SizeResult& res = results[j.size];
      const AlgorithmSpec& spec = *algos[j.algo];
      const std::size_t k = res.scale;
      CollectiveCall call;
      call.kind = CollectiveKind::allreduce;
      call.send = send.data();
      call.recv = recv.data();
      call.count = (res.bytes + kElem * k - 1) / (kElem * k);
      call.dtype = DataType::f32;
      call.op = ReduceOp::sum;
      call.wire = DataType::f32;
      me.transport.set_output(std::as_bytes(std::span(recv).first(call.count)));
      const char* refusal = spec.refusal(me.world, call);
      if (r == 0) {
        CollectiveCall whole = call;
        whole.count = res.bytes / kElem;
        AlgoTime& t = res.algos[j.algo];
        if (refusal) t.refusal = refusal;
        t.estimate_us = spec.estimate_us(me.model, me.world, res.bytes);
        if (j.algo == 0) {
          try {
            res.tuned = select_algorithm(whole, res.bytes, me.world, me.user, me.model).spec;
          } catch (const Error&) {
            res.tuned = nullptr;  // every algorithm refuses: the tuner has no choice
          }
        }
      }
      if (refusal) continue;
      try {
        const CallShape shape = validate(call, r, n);
        CallSignature sig = signature_of(call, n, shape);
        sig.seq = i + 1;
        sig.algo = algorithm_id(spec);
        const std::size_t seg =
            w.segment_bytes ? w.segment_bytes : ring_segment_bytes(res.bytes, n, me.model, 0);
        const CostModel saved = me.model;
        me.model.us_per_byte *= static_cast<double>(k);
        me.model.net_us_per_byte *= static_cast<double>(k);
        me.model.reduce_us_per_byte *= static_cast<double>(k);
        me.model.shm_us_per_byte *= static_cast<double>(k);
        auto ctx = CollectiveContext::over(me.world, me.scratch, sig,
                                           Deadline::after(std::chrono::minutes(10)),
                                           std::max(kElem, seg / k), Spin{0});
        try {
          spec.run(ctx, call, shape);
        } catch (...) {
          me.model = saved;
          throw;
        }
        me.model = saved;
        for (std::size_t e = 0; e < call.count; ++e)
          if (recv[e] != static_cast<float>(n)) {
            errors[static_cast<std::size_t>(r)] =
                fmt::format("rank {}: element {} is {}, not {}", r, e, recv[e], n);
            break;
          }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = fmt::format("rank {}: {}", r, e.what());
        me.transport.abort(e.what());
      }
    }
    sync.arrive_and_wait();
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace chorus::sim
