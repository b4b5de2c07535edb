// Small socket helpers shared by the TCP store server, its client, the
// launcher and the TCP transport (which only adds what set-up needs on top).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/core/deadline.hpp"

namespace chorus::bootstrap {

// Owns one file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct HostPort {
  std::string host;  // without brackets for IPv6
  uint16_t port = 0;
};

// Parses "host:port" or "[v6addr]:port". Throws UsageError(CHORUS_ERR_BOOTSTRAP)
// naming the text when it is not of that form.
HostPort parse_host_port(std::string_view addr);
// The inverse: brackets an IPv6 literal.
std::string format_host_port(const std::string& host, uint16_t port);

// Numeric host of a socket address ("127.0.0.1", "::1").
std::string numeric_host(const sockaddr* sa, socklen_t len);
// Port of a socket address in host byte order.
uint16_t socket_port(const sockaddr* sa);

void set_nonblocking(int fd);
void set_nodelay(int fd);

// Writes all of data, waiting for the socket with poll. Returns 0, the errno of
// a failed write, or ETIMEDOUT when the deadline passed first. Never raises
// SIGPIPE (MSG_NOSIGNAL).
int write_all(int fd, std::string_view data, const Deadline& deadline);

// Connects a non-blocking TCP socket to addr, retrying refused or unreachable
// attempts with backoff until the deadline (the server may start later).
// Throws IoError(CHORUS_ERR_BOOTSTRAP) naming addr and the last error.
UniqueFd connect_with_retry(const std::string& addr, const Deadline& deadline);

// One attempt to connect to addr (numeric host:port, no name lookup), for a
// peer that is known to listen: refused means gone. Throws IoError(
// CHORUS_ERR_IO) naming addr and the error; TCP_NODELAY set.
UniqueFd connect_once(const std::string& addr, const Deadline& deadline);

}  // namespace chorus::bootstrap
