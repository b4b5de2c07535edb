#include <fmt/format.h>

#include "base/bootstrap/env.hpp"
#include "base/bootstrap/net.hpp"
#include "base/core/log.hpp"

namespace chorus {

StoreHandle::StoreHandle(std::unique_ptr<TcpStoreServer> server,
                         std::unique_ptr<TcpStoreClient> client)
    : server_(std::move(server)), client_(std::move(client)) {}

StoreHandle::~StoreHandle() = default;

void StoreHandle::set(const std::string& key, const std::string& value) {
  client_->set(key, value);
}
std::string StoreHandle::get(const std::string& key, const Deadline& deadline) {
  return client_->get(key, deadline);
}
void StoreHandle::wait(const std::vector<std::string>& keys, const Deadline& deadline) {
  client_->wait(keys, deadline);
}
int64_t StoreHandle::add(const std::string& key, int64_t delta) {
  return client_->add(key, delta);
}

namespace {

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

}  // namespace

std::unique_ptr<StoreHandle> open_store(const BootstrapInfo& info, const Deadline& deadline) {
  std::unique_ptr<TcpStoreServer> server;
  std::string addr = info.store_addr;
  if (info.this_rank_hosts_store) {
    auto hp = bootstrap::parse_host_port(info.store_addr);
    // MASTER_ADDR is often a host name that other hosts resolve differently
    // from this one; listening on every interface avoids guessing. The job
    // token keeps strangers out.
    std::string bind_host = hp.host;
    if (!is_loopback(hp.host))
      bind_host = hp.host.find(':') != std::string::npos ? "::" : "0.0.0.0";
    server = std::make_unique<TcpStoreServer>(info.job_token, bind_host, hp.port);
    if (hp.port == 0) addr = bootstrap::format_host_port(hp.host, server->port());
    logger("bootstrap")
        .info("hosting the store on {} for {} ranks", server->address(), info.world_size);
  }
  auto client = std::make_unique<TcpStoreClient>(addr, info.job_token, deadline);
  return std::make_unique<StoreHandle>(std::move(server), std::move(client));
}

}  // namespace chorus
