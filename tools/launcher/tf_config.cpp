#include "tools/launcher/tf_config.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "base/bootstrap/net.hpp"
#include "base/bootstrap/tf_cluster.hpp"
#include "base/core/error.hpp"

namespace chorus::launcher {

namespace {

// Ports the kernel hands out for 127.0.0.1, all distinct: every socket stays
// bound until all are chosen.
std::vector<uint16_t> free_loopback_ports(int n) {
  std::vector<bootstrap::UniqueFd> held;
  std::vector<uint16_t> ports;
  for (int i = 0; i < n; ++i) {
    bootstrap::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw IoError(CHORUS_ERR_IO, errno_message("choosing a port for TF_CONFIG", errno));
    ports.push_back(bootstrap::socket_port(reinterpret_cast<sockaddr*>(&addr)));
    held.push_back(std::move(fd));
  }
  return ports;
}

}  // namespace

std::vector<std::string> tf_configs(int np, int ps) {
  using nlohmann::json;
  const bootstrap::TfClusterShape shape = bootstrap::tf_launch_shape(np, ps);
  const std::vector<uint16_t> ports = free_loopback_ports(np);
  json cluster = json::object();
  for (int r = 0; r < np; ++r)
    cluster[bootstrap::tf_task_of(shape, r).type].push_back(
        bootstrap::format_host_port("127.0.0.1", ports[static_cast<std::size_t>(r)]));
  std::vector<std::string> configs;
  for (int r = 0; r < np; ++r) {
    const bootstrap::TfTask task = bootstrap::tf_task_of(shape, r);
    configs.push_back(
        json{{"cluster", cluster}, {"task", {{"type", task.type}, {"index", task.index}}}}.dump());
  }
  return configs;
}

}  // namespace chorus::launcher
