// The cost model that ranks algorithms: a message step costs alpha, every
// byte on the critical path 1/beta, every byte reduced gamma; through shared
// memory a synchronisation costs shm_alpha and a byte copied shm_beta.
// Until measured link parameters arrive (calibration data), defaults() gives
// what loopback TCP and the shared-memory pipeline show on these machines:
// both alphas grow when ranks outnumber cores, because then every step waits
// for a sleeping rank to be scheduled.
#pragma once

#include <algorithm>
#include <cstddef>

namespace chorus {

// Where a team's ranks are, as far as costs go: the two link classes are the
// same host and another host. Set by whoever builds the team from the host
// map (collectives/team_hierarchy.hpp: describe_placement); the default is a
// team on one host.
struct Placement {
  int ring_crossings = 0;  // most edges of the ring in team order that leave one host; 0: one host
  int host_load = 1;       // most members on one host
  int ring_edges_across = 0;  // edges of the ring in team order between two hosts, in all
  // Rounds of pairwise exchange at distances 1, 2, 4, ... 2^(local_rounds-1)
  // (index XOR distance) that pair members of one host only.
  int local_rounds = 0;
  bool spans_hosts() const { return ring_crossings > 0; }
};

struct CostModel {
  static constexpr double kAlphaUs = 10, kShmAlphaUs = 0.3, kUsPerByte = 0.0004,
                          kReduceUsPerByte = 0.0002;
  double alpha_us = kAlphaUs;                    // per point-to-point message step
  double us_per_byte = kUsPerByte;               // 1/beta: ~2.5 GB/s
  double reduce_us_per_byte = kReduceUsPerByte;  // gamma: ~5 GB/s
  double shm_alpha_us = kShmAlphaUs;             // per synchronisation through shared memory
  double shm_us_per_byte = 0.0001;               // a byte copied through the segment: ~10 GB/s
  // Between hosts (CHORUS_NET_ALPHA_US, CHORUS_NET_GBPS): a host's link is
  // shared by every message that leaves the host at once.
  double net_alpha_us = 30;
  double net_us_per_byte = 0.0008;   // 10 Gbit/s
  bool oversubscribed = false;       // more ranks on this host than cores
  int ranks_on_host = 1, cores = 0;  // what defaults() was given (cores 0: unknown)
  static CostModel defaults(int ranks_on_host, int cores);
  // The model for a step in which only `share` of the ranks run while the
  // others wait asleep (the fold of recursive doubling on 3 ranks: 2 of them):
  // fewer ranks compete for the cores, so where ranks outnumber cores such a
  // step pays less of the crowd's wake-ups, and its copies and reductions get
  // more of a core. Measured over loopback TCP, 3 ranks on 2 cores: a step of
  // recursive doubling (2 ranks at a time) took 4.5 us, one of the ring (all
  // 3 at once) 10-11 us; at 1 MiB recursive doubling's three whole-buffer
  // transfers took 700 us, the ring's four thirds 610 us.
  CostModel with_running_share(double share) const;
  // The link between hosts: latency per message step, and rate in Gbit/s.
  void set_network(double alpha_us, double gbps) {
    net_alpha_us = alpha_us;
    net_us_per_byte = 8e-3 / gbps;  // 8 bits a byte, 1e-9 s per ns of a Gbit/s bit, in us
  }

  // A message step of a team in placement p: over the network when the
  // team spans hosts. Per byte, `flows` messages share a host's link.
  double alpha(const Placement& p) const { return p.spans_hosts() ? net_alpha_us : alpha_us; }
  double per_byte(const Placement& p, int flows) const {
    return p.spans_hosts() ? net_us_per_byte * (flows < 1 ? 1 : flows) : us_per_byte;
  }
  // Ring steps: each host's link carries its ring edges that leave it.
  double ring_per_byte(const Placement& p) const { return per_byte(p, p.ring_crossings); }
  // Exchanges with any member (doubling, trees, pairwise): all of a host's
  // members may send across at once.
  double exchange_per_byte(const Placement& p) const { return per_byte(p, p.host_load); }
  // The mean latency of a step of a ring of n members: each step waits for
  // the previous member's, so the chain of dependencies goes around the ring
  // and pays every edge in turn, the ones inside a host at the local alpha.
  double ring_alpha(const Placement& p, int n) const {
    if (!p.spans_hosts() || n < 1) return alpha_us;
    return (p.ring_edges_across * net_alpha_us + (n - p.ring_edges_across) * alpha_us) / n;
  }
  // `steps` steps of a ring of n members, each moving `chunk` bytes over
  // every edge, with `reduce_us` of reductions on the chain of dependencies.
  // On one host the steps add up. Across hosts the sends of a step overlap:
  // the call takes the longer of the chain of dependencies (each step waits
  // for the previous member's, so the chain pays every edge in turn, those
  // inside a host at local cost) and its busiest host link's traffic.
  double ring_time(const Placement& p, int n, double steps, double chunk, double reduce_us) const {
    if (!p.spans_hosts() || n < 1) return steps * (alpha_us + chunk * us_per_byte) + reduce_us;
    const double across = p.ring_edges_across, loops = steps / n;
    const double chain = loops * (across * (net_alpha_us + chunk * ring_per_byte(p)) +
                                  (n - across) * (alpha_us + chunk * us_per_byte)) +
                         reduce_us;
    return std::max(chain, steps * chunk * ring_per_byte(p));
  }
  // Folding a team of n ranks onto the largest power of two p <= n and back
  // (recursive doubling, Rabenseifner): the n - p extra ranks each send
  // `bytes` to a partner, which reduces them in, and get `bytes` back;
  // 2 (n - p) ranks running. A transfer goes one way, where a step's
  // per-byte cost is that of every rank sending and receiving at once: on
  // one host, where the CPUs copy the bytes, half the copying per rank. It
  // is charged so only where no rank of the algorithm waits for a core (the
  // p core ranks and the 2 (n - p) of the fold each fit on the cores): 3
  // ranks on 2 cores over loopback TCP, 512 KiB, recursive doubling's fold,
  // exchange and unfold took 356-456 us, where charging the fold as
  // exchanges gave 589. With 5 and 6 ranks on 2 cores the old charge
  // matched the measured choices (docs/benchmarks.md, "Folds on two
  // cores"); between hosts each direction of a link has its own bandwidth.
  double fold_in_and_out(const Placement& p, int n, int pow2, double bytes) const {
    if (n == pow2) return 0;
    const CostModel fold = with_running_share(2.0 * (n - pow2) / n);
    const bool fits = cores <= 0 || (pow2 <= cores && 2 * (n - pow2) <= cores);
    const double one_way = !p.spans_hosts() && fits ? 0.5 : 1.0;
    return 2 * (fold.alpha(p) + bytes * one_way * fold.exchange_per_byte(p)) +
           bytes * fold.reduce_us_per_byte;
  }
  // One round of pairwise exchange at distance 2^k moving `bytes` each way:
  // inside the hosts for the first p.local_rounds distances.
  double exchange_round(const Placement& p, int k, double bytes) const {
    if (!p.spans_hosts() || k < p.local_rounds) return alpha_us + bytes * us_per_byte;
    return net_alpha_us + bytes * exchange_per_byte(p);
  }
};

// Segment size of the ring pipelines for a call of `bytes` per rank:
// `configured` when the user set one; else about 16 segments per chunk, within
// [256K, 1M], so that transfer and reduction overlap even for a few MiB (while
// segments stay large enough that per-message costs do not dominate). When
// ranks outnumber cores every extra step costs a wake-up: 1M.
std::size_t ring_segment_bytes(std::size_t bytes, int ranks, const CostModel& model,
                               std::size_t configured);

// ceil(log2(n)) for n >= 1: rounds of tree and dissemination patterns.
int log2_ceil(int n);

}  // namespace chorus
