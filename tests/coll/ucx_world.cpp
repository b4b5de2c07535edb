#include "tests/coll/ucx_world.hpp"

#include <map>
#include <memory>
#include <thread>

#include "lib/bootstrap/tcp_store.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace chorus::test {
namespace {

// Worlds close concurrently, as separate processes would.
struct UcxWorld {
  std::unique_ptr<TcpStoreServer> server;
  std::vector<std::unique_ptr<TcpStoreClient>> stores;
  std::vector<std::unique_ptr<ucx::UcxTransport>> transports;
  ~UcxWorld() {
    std::vector<std::thread> closers;
    for (auto& t : transports)
      if (t) closers.emplace_back([&t] { t.reset(); });
    for (auto& c : closers) c.join();
  }
};

std::map<int, std::unique_ptr<UcxWorld>>& worlds() {
  static std::map<int, std::unique_ptr<UcxWorld>> all;
  return all;
}

}  // namespace

std::vector<Transport*> ucx_world(int n) {
  auto& slot = worlds()[n];
  if (!slot) {
    auto world = std::make_unique<UcxWorld>();
    world->server = std::make_unique<TcpStoreServer>("coll-test");
    world->stores.resize(static_cast<std::size_t>(n));
    world->transports.resize(static_cast<std::size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        auto& store = world->stores[static_cast<std::size_t>(r)];
        store = std::make_unique<TcpStoreClient>(world->server->address(), "coll-test",
                                                 Deadline::after(std::chrono::seconds(30)));
        ucx::UcxOptions o;
        o.rank = r;
        o.size = n;
        o.token = "coll-test";
        o.connect_timeout_s = 30;
        o.close_timeout_s = 10;
        world->transports[static_cast<std::size_t>(r)] =
            std::make_unique<ucx::UcxTransport>(*store, o);
      });
    for (auto& t : threads) t.join();
    slot = std::move(world);
  }
  std::vector<Transport*> out;
  for (auto& t : slot->transports) out.push_back(t.get());
  return out;
}

void drop_ucx_world(int n) {
  worlds().erase(n);
}

}  // namespace chorus::test
