#include "transports/tcp/socket.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

#include "base/core/error.hpp"

namespace chorus::tcp {

Fd listen_on(const std::string& host, uint16_t* port_out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), "0", &hints, &res);
  if (rc != 0 || !res)
    throw IoError(CHORUS_ERR_IO, fmt::format("cannot listen on '{}': {}", host, gai_strerror(rc)));
  Fd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  int bind_rc = fd ? ::bind(fd.get(), res->ai_addr, res->ai_addrlen) : -1;
  int err = errno;
  freeaddrinfo(res);
  if (!fd || bind_rc != 0)
    throw IoError(CHORUS_ERR_IO, errno_message(fmt::format("bind({})", host), err));
  if (::listen(fd.get(), 128) != 0) throw IoError(CHORUS_ERR_IO, errno_message("listen()", errno));
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  *port_out = bootstrap::socket_port(reinterpret_cast<sockaddr*>(&bound));
  return fd;
}

void set_stream_options(int fd, std::size_t buffer_bytes) {
  bootstrap::set_nodelay(fd);
  if (buffer_bytes > 0) {
    int size = static_cast<int>(std::min<std::size_t>(buffer_bytes, INT32_MAX));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  }
}

std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "unknown";
  auto* sa = reinterpret_cast<sockaddr*>(&ss);
  return bootstrap::format_host_port(bootstrap::numeric_host(sa, len), bootstrap::socket_port(sa));
}

void write_all(int fd, std::span<const std::byte> data, const Deadline& deadline) {
  int err = bootstrap::write_all(
      fd, std::string_view(reinterpret_cast<const char*>(data.data()), data.size()), deadline);
  if (err == ETIMEDOUT) throw IoError(CHORUS_ERR_TIMEOUT, "send timed out during set-up");
  if (err != 0) throw IoError(CHORUS_ERR_IO, errno_message("send() during set-up", err));
}

void read_exact(int fd, std::span<std::byte> data, const Deadline& deadline) {
  while (!data.empty()) {
    ssize_t n = ::recv(fd, data.data(), data.size(), MSG_DONTWAIT);
    if (n > 0) {
      data = data.subspan(static_cast<std::size_t>(n));
    } else if (n == 0) {
      throw IoError(CHORUS_ERR_IO, "connection closed by peer during set-up");
    } else if (errno == EAGAIN || errno == EINTR) {
      if (deadline.expired()) throw IoError(CHORUS_ERR_TIMEOUT, "receive timed out during set-up");
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, deadline.poll_timeout_ms()) < 0 && errno != EINTR)
        throw IoError(CHORUS_ERR_IO, errno_message("poll()", errno));
    } else {
      throw IoError(CHORUS_ERR_IO, errno_message("recv()", errno));
    }
  }
}

bool read_some(int fd, std::vector<std::byte>& in, std::size_t want, std::string* error) {
  const std::size_t had = in.size();
  in.resize(had + want);
  ssize_t n = ::recv(fd, in.data() + had, want, MSG_DONTWAIT);
  in.resize(had + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
  if (n > 0) return true;
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  *error = n == 0 ? "closed" : errno_message("receive failed", errno);
  return false;
}

}  // namespace chorus::tcp
