#include "transports/tcp/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "lib/core/config.hpp"
#include "lib/core/error.hpp"

namespace chorus::tcp {

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::pair<std::string, uint16_t> split_host_port(const std::string& addr) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == addr.size())
    throw UsageError(fmt::format("address '{}' is not host:port", addr));
  std::string host = addr.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int64_t port = parse_int(std::string_view(addr).substr(colon + 1));
  if (port <= 0 || port > 65535) throw UsageError(fmt::format("bad port in '{}'", addr));
  return {host, static_cast<uint16_t>(port)};
}

std::string join_host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

namespace {

struct Resolved {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = AF_INET;
};

Resolved resolve(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0 || !res)
    throw IoError(CHORUS_ERR_IO, fmt::format("cannot resolve '{}': {}", host, gai_strerror(rc)));
  Resolved r;
  std::memcpy(&r.addr, res->ai_addr, res->ai_addrlen);
  r.len = res->ai_addrlen;
  r.family = res->ai_family;
  freeaddrinfo(res);
  return r;
}

}  // namespace

Fd listen_on(const std::string& host, uint16_t* port_out) {
  Resolved r = resolve(host, 0);
  Fd fd(::socket(r.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw IoError(CHORUS_ERR_IO, errno_message("socket()", errno));
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&r.addr), r.len) != 0)
    throw IoError(CHORUS_ERR_IO, errno_message(fmt::format("bind({})", host), errno));
  if (::listen(fd.get(), 128) != 0) throw IoError(CHORUS_ERR_IO, errno_message("listen()", errno));
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  *port_out = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

Fd connect_to(const std::string& host, uint16_t port, const Deadline& deadline) {
  Resolved r = resolve(host, port);
  auto backoff = std::chrono::milliseconds(1);
  while (true) {
    Fd fd(::socket(r.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) throw IoError(CHORUS_ERR_IO, errno_message("socket()", errno));
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&r.addr), r.len) == 0) return fd;
    int err = errno;
    if (err != ECONNREFUSED && err != EAGAIN && err != ETIMEDOUT && err != EINTR)
      throw IoError(CHORUS_ERR_IO,
                    errno_message(fmt::format("connect({})", join_host_port(host, port)), err));
    if (deadline.expired())
      throw IoError(
          CHORUS_ERR_TIMEOUT,
          errno_message(fmt::format("connect({}) timed out", join_host_port(host, port)), err));
    std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(backoff, deadline.remaining()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
}

void set_nonblocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void set_stream_options(int fd, std::size_t buffer_bytes) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (buffer_bytes > 0) {
    int size = static_cast<int>(std::min<std::size_t>(buffer_bytes, INT32_MAX));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  }
}

namespace {
void wait_fd(int fd, short events, const Deadline& deadline, const char* what) {
  while (true) {
    if (deadline.expired()) throw IoError(CHORUS_ERR_TIMEOUT, fmt::format("{} timed out", what));
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.poll_timeout_ms());
    if (rc > 0) return;
    if (rc < 0 && errno != EINTR) throw IoError(CHORUS_ERR_IO, errno_message("poll()", errno));
  }
}
}  // namespace

void write_all(int fd, std::span<const std::byte> data, const Deadline& deadline) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data = data.subspan(static_cast<std::size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      wait_fd(fd, POLLOUT, deadline, "send");
    } else {
      throw IoError(CHORUS_ERR_IO, errno_message("send()", errno));
    }
  }
}

void read_exact(int fd, std::span<std::byte> data, const Deadline& deadline) {
  while (!data.empty()) {
    ssize_t n = ::recv(fd, data.data(), data.size(), MSG_DONTWAIT);
    if (n > 0) {
      data = data.subspan(static_cast<std::size_t>(n));
    } else if (n == 0) {
      throw IoError(CHORUS_ERR_IO, "connection closed by peer during set-up");
    } else if (errno == EAGAIN || errno == EINTR) {
      wait_fd(fd, POLLIN, deadline, "receive");
    } else {
      throw IoError(CHORUS_ERR_IO, errno_message("recv()", errno));
    }
  }
}

}  // namespace chorus::tcp
