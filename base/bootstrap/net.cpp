#include "base/bootstrap/net.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <thread>

#include "base/core/error.hpp"
#include "base/core/log.hpp"

namespace chorus::bootstrap {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

HostPort parse_host_port(std::string_view addr) {
  auto bad = [&](const char* why) {
    return UsageError(CHORUS_ERR_BOOTSTRAP,
                      fmt::format("store address '{}' is not host:port ({})", addr, why));
  };
  std::string_view host, port;
  if (addr.starts_with('[')) {
    auto close = addr.find(']');
    if (close == std::string_view::npos || close + 1 >= addr.size() || addr[close + 1] != ':')
      throw bad("IPv6 addresses are written [addr]:port");
    host = addr.substr(1, close - 1);
    port = addr.substr(close + 2);
  } else {
    auto colon = addr.rfind(':');
    if (colon == std::string_view::npos) throw bad("no ':'");
    host = addr.substr(0, colon);
    port = addr.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) throw bad("IPv6 addresses need brackets");
  }
  if (host.empty()) throw bad("empty host");
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || value > 65535)
    throw bad("port must be a number 0-65535");
  return {std::string(host), static_cast<uint16_t>(value)};
}

std::string format_host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

std::string numeric_host(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST];
  if (getnameinfo(sa, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  return host;
}

uint16_t socket_port(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

void set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    throw IoError(CHORUS_ERR_IO, errno_message("fcntl(O_NONBLOCK)", errno));
}

void set_nodelay(int fd) {
  int one = 1;
  // Store requests are small and latency-bound; failure here is harmless.
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int write_all(int fd, std::string_view data, const Deadline& deadline) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return errno;
    if (deadline.expired()) return ETIMEDOUT;
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, deadline.poll_timeout_ms()) < 0 && errno != EINTR) return errno;
  }
  return 0;
}

namespace {

// One connection attempt to one resolved address; returns the socket or -errno.
int try_connect(const addrinfo* ai, const Deadline& deadline, UniqueFd* out) {
  UniqueFd fd(
      socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
  if (!fd.valid()) return errno;
  if (connect(fd.get(), ai->ai_addr, ai->ai_addrlen) < 0) {
    if (errno != EINPROGRESS) return errno;
    pollfd p{fd.get(), POLLOUT, 0};
    int r;
    do {
      // A single attempt is bounded to a second so that a dropped SYN is retried.
      r = poll(&p, 1, std::min(deadline.poll_timeout_ms(), 1000));
    } while (r < 0 && errno == EINTR);
    if (r == 0) return ETIMEDOUT;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) < 0) return errno;
    if (err != 0) return err;
  }
  *out = std::move(fd);
  return 0;
}

}  // namespace

UniqueFd connect_with_retry(const std::string& addr, const Deadline& deadline) {
  HostPort hp = parse_host_port(addr);
  auto start = Clock::now();
  std::string last_error = "no attempt made";
  auto backoff = std::chrono::milliseconds(5);
  for (int attempt = 1;; ++attempt) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    std::string port = std::to_string(hp.port);
    int gai = getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &res);
    if (gai != 0) {
      last_error = fmt::format("cannot resolve '{}': {}", hp.host, gai_strerror(gai));
    } else {
      for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        UniqueFd fd;
        int err = try_connect(ai, deadline, &fd);
        if (err == 0) {
          freeaddrinfo(res);
          set_nodelay(fd.get());
          logger("bootstrap").debug("connected to store at {} after {} attempt(s)", addr, attempt);
          return fd;
        }
        last_error = errno_message("connect", err);
      }
      freeaddrinfo(res);
    }
    if (deadline.expired()) break;
    // The store may not be up yet: back off (capped) instead of spinning.
    std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(backoff, deadline.remaining()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(250));
  }
  throw IoError(CHORUS_ERR_BOOTSTRAP,
                fmt::format("could not connect to the store at {} within {:.1f} s: {}", addr,
                            seconds_since(start), last_error));
}

UniqueFd connect_once(const std::string& addr, const Deadline& deadline) {
  const HostPort hp = parse_host_port(addr);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int gai = getaddrinfo(hp.host.c_str(), std::to_string(hp.port).c_str(), &hints, &res);
  if (gai != 0)
    throw IoError(CHORUS_ERR_IO, fmt::format("cannot resolve '{}': {}", addr, gai_strerror(gai)));
  UniqueFd fd;
  const int err = try_connect(res, deadline, &fd);
  freeaddrinfo(res);
  if (err != 0) throw IoError(CHORUS_ERR_IO, errno_message(fmt::format("connect({})", addr), err));
  set_nodelay(fd.get());
  return fd;
}

}  // namespace chorus::bootstrap
