// The link probe (lib/comm/link_probe.hpp) among threads: 4 ranks on 2
// pretend hosts over the in-process transport, with a store in memory.
// Every rank must end up with the same link, probed or (when the probe
// fails or is not wanted) configured.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "base/core/error.hpp"
#include "lib/comm/link_probe.hpp"
#include "transports/inproc/inproc.hpp"

using namespace chorus;

namespace {

class MemoryStore : public Store {
 public:
  void set(const std::string& key, const std::string& value) override {
    std::lock_guard lock(mu_);
    values_[key] = value;
    cv_.notify_all();
  }
  std::string get(const std::string& key, const Deadline& deadline) override {
    std::unique_lock lock(mu_);
    if (!cv_.wait_until(lock, deadline.time_point(), [&] { return values_.count(key) > 0; }))
      throw IoError(CHORUS_ERR_TIMEOUT, "no key " + key);
    return values_[key];
  }
  void wait(const std::vector<std::string>& keys, const Deadline& deadline) override {
    for (const auto& k : keys) get(k, deadline);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    std::lock_guard lock(mu_);
    const int64_t v = (values_.count(key) ? std::stoll(values_[key]) : 0) + delta;
    values_[key] = std::to_string(v);
    return v;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
};

// Runs resolve_network on 4 ranks (hosts a,a,b,b: leaders 0 and 2); the
// leaders' probe teams get tags tag_of(leader).
std::vector<NetworkLink> resolve_on_world(const Config& config,
                                          const std::function<uint32_t(int)>& tag_of) {
  auto fabric = make_inproc_fabric(4);
  MemoryStore store;
  std::vector<NetworkLink> out(4);
  std::vector<std::exception_ptr> errors(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      try {
        InprocTransport transport(fabric, r);
        topology::HostMap hosts;
        hosts.host_of_rank = {"a", "a", "b", "b"};
        hosts.rank = r;
        std::optional<Team> probe;
        if (r % 2 == 0) probe = Team::of(transport, {0, 2}, tag_of(r), nullptr, "link probe");
        std::shared_ptr<void> leftovers;
        out[r] = resolve_network(config, hosts, probe ? &*probe : nullptr, transport, store, "t/",
                                 leftovers);
        transport.close();
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

void check_same(const std::vector<NetworkLink>& links) {
  for (const NetworkLink& n : links) {
    CHECK(n.alpha_us == links[0].alpha_us);
    CHECK(n.gbps == links[0].gbps);
    CHECK(n.source == links[0].source);
    CHECK(n.hosts == 2);
  }
}

}  // namespace

TEST_CASE("link probe: every rank gets the same probed link", "[link_probe]") {
  const auto links = resolve_on_world(Config{}, [](int) { return 8u; });
  check_same(links);
  CHECK(links[0].source == "probed");
  CHECK(links[0].alpha_us > 0);
  CHECK(links[0].gbps > 0);
  for (const NetworkLink& n : links) CHECK(n.probe_ms > 0);
}

TEST_CASE("link probe: values the user set win and no probe runs", "[link_probe]") {
  Config config = load_config(map_env({{"CHORUS_NET_GBPS", "3"}}));
  // Different tags: a probe would time out, so passing shows none ran.
  const auto links = resolve_on_world(config, [](int r) { return 8u + r; });
  check_same(links);
  CHECK(links[0].gbps == 3);
  CHECK(links[0].alpha_us == 30);
  CHECK(links[0].probe_ms == 0);
  CHECK(links[0].source == "CHORUS_NET_ALPHA_US/CHORUS_NET_GBPS");
  config = load_config(map_env({{"CHORUS_LINK_PROBE", "0"}}));
  const auto off = resolve_on_world(config, [](int r) { return 8u + r; });
  check_same(off);
  CHECK(off[0].gbps == 10);
  CHECK(off[0].source == "default (CHORUS_LINK_PROBE=0)");
}

TEST_CASE("link probe: a failed probe gives every rank the configured link", "[link_probe]") {
  // The leaders' messages never meet (different tags): both time out at
  // CHORUS_TIMEOUT, publish the failure, and every rank falls back.
  const Config config = load_config(map_env({{"CHORUS_TIMEOUT", "300ms"}}));
  const auto links = resolve_on_world(config, [](int r) { return 8u + r; });
  check_same(links);
  CHECK(links[0].gbps == 10);
  CHECK(links[0].alpha_us == 30);
  CHECK(links[0].source == "default (the link probe failed)");
}

TEST_CASE("link probe: apply_network sets the link's values", "[link_probe]") {
  Link link;
  apply_network(link, 12.5, 25, "tuning file");
  REQUIRE(link.network);
  CHECK(link.network->alpha_us == 12.5);
  CHECK(link.network->gbps == 25);
  CHECK(link.network->source == "tuning file");
  CHECK_THROWS_AS(apply_network(link, 0, 25, "tuning file"), UsageError);
}
