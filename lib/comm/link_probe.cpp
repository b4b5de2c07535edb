#include "lib/comm/link_probe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "base/core/error.hpp"
#include "base/core/log.hpp"

namespace chorus {
namespace {

spdlog::logger& topology_log() {
  static spdlog::logger& subsystem = logger("topology");  // the registry locks a mutex
  return subsystem;
}

constexpr std::size_t kPilotBytes = 256 << 10;
constexpr std::size_t kMinBlock = 256 << 10;  // 16 chunks of 16 KiB
constexpr std::size_t kMaxBlock = 4 << 20;
// The bandwidth block takes about this long at the slowest pilot rate, so
// that the probe stays well under a second even on a slow link.
constexpr double kBlockSeconds = 0.04;
// The bandwidth block goes as a train of this many messages, this many
// times; the best train counts (a rank descheduled on a busy host slows one).
constexpr int kTrainChunks = 16;
constexpr int kTrains = 2;
// Hops of the latency token in all (rounds * leaders): enough rounds to
// average over on few hosts, few enough rounds that many hosts stay fast.
constexpr int kTokenHops = 64;
// The longest a leader waits for the others (they arrive at the probe at
// slightly different times) and for a message; then the probe fails.
constexpr double kProbeDeadlineS = 5;
// Every rank reads the leaders' results by then.
constexpr double kResultDeadlineS = 15;
// The probe's messages are told apart from any collective's by this layout.
constexpr uint32_t kProbeLayout = 0x50524f42;  // "PROB"

// Everything a probe's requests point into; see Link::probe_leftovers.
struct ProbeBuffers {
  std::vector<std::byte> out, in;
  double token_out = 0, token_in = 0;
};

class Ring {
 public:
  Ring(const Team& team, const Deadline& deadline, Spin spin, ProbeBuffers& b)
      : t_(*team.transport), tag_(team.tag), deadline_(deadline), spin_(spin), b_(b) {
    const int n = team.size();
    next_ = team.member((team.index + 1) % n);
    prev_ = team.member((team.index + n - 1) % n);
  }

  // Sends `bytes` of out to the next leader while receiving as many from the previous.
  void shift(std::size_t bytes) {
    RequestPtr r[2] = {t_.irecv(prev_, tag_, sig(bytes), std::span(b_.in.data(), bytes)),
                       t_.isend(next_, tag_, sig(bytes), std::span(b_.out.data(), bytes))};
    wait_all(t_, r, deadline_, spin_, "link probe");
  }
  // A train of `chunks` messages of `bytes` each to the next leader while
  // the previous one's arrives; the rate of the arrivals after the first, in
  // Gbit/s. Timing from the first arrival leaves out how much later the
  // previous leader began (the leaders never start at the same instant) and
  // the bucket of a shaped link, which the first chunk empties.
  double train(std::size_t bytes, int chunks) {
    std::vector<RequestPtr> recvs, sends;
    for (int c = 0; c < chunks; ++c)
      recvs.push_back(
          t_.irecv(prev_, tag_, sig(bytes), std::span(b_.in.data() + c * bytes, bytes)));
    for (int c = 0; c < chunks; ++c)
      sends.push_back(
          t_.isend(next_, tag_, sig(bytes), std::span(b_.out.data() + c * bytes, bytes)));
    wait_one(t_, recvs.front(), deadline_, spin_, "link probe");
    const auto first = Clock::now();
    wait_all(t_, recvs, deadline_, spin_, "link probe");
    const double seconds = std::max(seconds_since(first), 1e-9);
    wait_all(t_, sends, deadline_, spin_, "link probe");
    return static_cast<double>(bytes) * (chunks - 1) * 8e-9 / seconds;
  }
  void send_token() {
    wait_one(t_, t_.isend(next_, tag_, sig(8), as_bytes(b_.token_out)), deadline_, spin_,
             "link probe");
  }
  void recv_token() {
    wait_one(t_, t_.irecv(prev_, tag_, sig(8), as_bytes(b_.token_in)), deadline_, spin_,
             "link probe");
  }

 private:
  static std::span<std::byte> as_bytes(double& d) {
    return std::span(reinterpret_cast<std::byte*>(&d), sizeof d);
  }
  static CallSignature sig(std::size_t bytes) {
    CallSignature s;
    s.count = bytes;
    s.layout = kProbeLayout;
    return s;
  }

  Transport& t_;
  uint32_t tag_;
  const Deadline& deadline_;
  Spin spin_;
  ProbeBuffers& b_;
  int next_ = 0, prev_ = 0;
};

// Parses one leader's published result: "ok ALPHA GBPS MS" or "failed WHY".
bool parse_result(const std::string& text, LinkMeasurement& m, std::string& why) {
  std::istringstream in(text);
  std::string status;
  in >> status;
  if (status == "ok" && (in >> m.alpha_us >> m.gbps >> m.ms) && m.alpha_us > 0 && m.gbps > 0)
    return true;
  why = status == "failed" ? text.substr(std::min<std::size_t>(7, text.size()))
                           : fmt::format("unreadable result '{}'", text);
  return false;
}

// A leader's result; a leader that died (the transport knows) will never
// publish one, so the wait ends then rather than at the deadline.
std::string read_result(Store& store, const std::string& key, const Deadline& deadline,
                        Transport& transport) {
  while (true) {
    const auto slice = Deadline::at(
        std::min(deadline.time_point(), Clock::now() + std::chrono::milliseconds(100)));
    try {
      return store.get(key, slice);
    } catch (const IoError& e) {
      if (e.code() != CHORUS_ERR_TIMEOUT || deadline.expired()) throw;
    }
    transport.check_failed();
  }
}

}  // namespace

LinkMeasurement measure_link_ring(const Team& probe, const Deadline& deadline, Spin spin,
                                  std::shared_ptr<void>& leftovers) {
  const auto start = Clock::now();
  auto buffers = std::make_shared<ProbeBuffers>();
  ProbeBuffers& b = *buffers;
  b.out.assign(kMaxBlock, std::byte{0x5a});
  b.in.resize(kMaxBlock);
  LinkMeasurement m;
  const int hosts = probe.size();
  try {
    Ring ring(probe, deadline, spin, b);
    // 1. Warm-up (the first message may meet connections still settling),
    // then the pilot block.
    ring.shift(8);
    const auto pilot_start = Clock::now();
    ring.shift(kPilotBytes);
    const double pilot_rate = kPilotBytes / std::max(seconds_since(pilot_start), 1e-6);  // B/s

    // 2. The token; it carries the slowest pilot rate seen.
    m.rounds = std::clamp(kTokenHops / hosts, 3, 20);
    std::vector<Clock::time_point> received;
    double slowest = pilot_rate;
    for (int round = 0; round < m.rounds; ++round) {
      if (probe.index == 0) {
        b.token_out = std::min(slowest, pilot_rate);
        ring.send_token();
        ring.recv_token();
      } else {
        ring.recv_token();
        b.token_out = std::min(b.token_in, pilot_rate);
        ring.send_token();
      }
      received.push_back(Clock::now());
      slowest = b.token_in;
    }
    // From round 1 on the token holds every leader's pilot rate: all agree.
    m.pilot_gbps = slowest * 8e-9;
    m.alpha_us =
        std::chrono::duration<double, std::micro>(received.back() - received.front()).count() /
        ((m.rounds - 1) * hosts);

    // 3. The block, sized from the agreed rate.
    const auto wanted = static_cast<std::size_t>(slowest * kBlockSeconds);
    m.bytes = std::clamp(wanted / kMinBlock * kMinBlock, kMinBlock, kMaxBlock);
    for (int train = 0; train < kTrains; ++train)
      m.gbps = std::max(m.gbps, ring.train(m.bytes / kTrainChunks, kTrainChunks));
  } catch (...) {
    leftovers = buffers;  // requests may still be outstanding on them
    throw;
  }
  m.ms = seconds_since(start) * 1e3;
  return m;
}

NetworkLink configured_network(const Config& config) {
  NetworkLink n;
  n.alpha_us = config.net_alpha_us;
  n.gbps = config.net_gbps;
  n.source = config.net_given ? "CHORUS_NET_ALPHA_US/CHORUS_NET_GBPS" : "default";
  return n;
}

void apply_network(Link& link, double alpha_us, double gbps, const std::string& source) {
  if (!(alpha_us > 0) || !(gbps > 0))
    throw UsageError(
        fmt::format("{}: the link between hosts needs alpha_us > 0 and gbps > 0, "
                    "not {} and {}",
                    source, alpha_us, gbps));
  NetworkLink n;
  n.alpha_us = alpha_us;
  n.gbps = gbps;
  n.source = source;
  std::lock_guard lock(link.mu);
  link.network = n;
}

NetworkLink resolve_network(const Config& config, const topology::HostMap& hosts, const Team* probe,
                            Transport& transport, Store& store, const std::string& key_prefix,
                            std::shared_ptr<void>& leftovers) {
  NetworkLink configured = configured_network(config);
  configured.hosts = hosts.host_count();
  if (configured.hosts < 2 || config.net_given) return configured;
  if (!config.link_probe) {
    configured.source += " (CHORUS_LINK_PROBE=0)";
    return configured;
  }
  const auto start = Clock::now();
  const auto limit = std::chrono::duration<double>(std::min(kProbeDeadlineS, config.timeout_s));
  if (probe) {
    std::string result;
    try {
      const LinkMeasurement m = measure_link_ring(
          *probe, Deadline::after(std::chrono::duration_cast<std::chrono::nanoseconds>(limit)),
          wait_spin(config, false), leftovers);
      topology_log().debug(
          "rank {}: link probe among {} leaders: alpha {:.1f} us over {} token rounds, {:.3f} "
          "Gbit/s with a {} byte block (pilot: {:.3f} Gbit/s), {:.1f} ms",
          hosts.rank, probe->size(), m.alpha_us, m.rounds, m.gbps, m.bytes, m.pilot_gbps, m.ms);
      // Exact decimal round trip: every rank parses the same numbers.
      result = fmt::format("ok {:.17g} {:.17g} {:.17g}", m.alpha_us, m.gbps, m.ms);
    } catch (const std::exception& e) {
      topology_log().warn("rank {}: the link probe failed here: {}", hosts.rank, e.what());
      result = fmt::format("failed rank {}: {}", hosts.rank, e.what());
    }
    try {
      store.set(fmt::format("{}linkprobe/{}", key_prefix, hosts.rank), result);
    } catch (const std::exception& e) {
      topology_log().warn("rank {}: cannot publish the link probe's result: {}", hosts.rank,
                          e.what());
    }
  }
  // Every rank: the worst of all leaders' links.
  NetworkLink worst;
  worst.source = "probed";
  worst.hosts = configured.hosts;
  worst.alpha_us = 0;
  worst.gbps = 0;
  std::string failure;
  try {
    const auto deadline = Deadline::after(std::chrono::duration_cast<std::chrono::nanoseconds>(
        limit + std::chrono::duration<double>(kResultDeadlineS)));
    for (int r = 0; r < hosts.size() && failure.empty(); ++r) {
      bool leader = true;
      for (int q = 0; q < r && leader; ++q) leader = !hosts.same_host(q, r);
      if (!leader) continue;
      LinkMeasurement m;
      if (!parse_result(
              read_result(store, fmt::format("{}linkprobe/{}", key_prefix, r), deadline, transport),
              m, failure))
        break;
      worst.alpha_us = std::max(worst.alpha_us, m.alpha_us);
      worst.gbps = worst.gbps == 0 ? m.gbps : std::min(worst.gbps, m.gbps);
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  worst.probe_ms = seconds_since(start) * 1e3;
  if (!failure.empty()) {
    topology_log().warn("rank {}: link probe failed ({}); using {} alpha {} us, {} Gbit/s",
                        hosts.rank, failure, configured.source, configured.alpha_us,
                        configured.gbps);
    configured.source += " (the link probe failed)";
    return configured;
  }
  topology_log().info(
      "rank {}: link between hosts probed among {} hosts: alpha {:.1f} us, {:.3f} Gbit/s "
      "({:.1f} ms)",
      hosts.rank, worst.hosts, worst.alpha_us, worst.gbps, worst.probe_ms);
  return worst;
}

}  // namespace chorus
