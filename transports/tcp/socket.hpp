// Thin POSIX socket helpers for the TCP transport (IPv4 and IPv6).
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "lib/core/deadline.hpp"

namespace chorus::tcp {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

// "host:port" or "[v6]:port" -> host, port. Throws UsageError.
std::pair<std::string, uint16_t> split_host_port(const std::string& addr);
std::string join_host_port(const std::string& host, uint16_t port);

// Listens on host (numeric address) with a kernel-chosen port.
Fd listen_on(const std::string& host, uint16_t* port_out);
// Connects to host:port, retrying refused connections until the deadline.
// Throws IoError(CHORUS_ERR_IO / CHORUS_ERR_TIMEOUT).
Fd connect_to(const std::string& host, uint16_t port, const Deadline& deadline);

void set_nonblocking(int fd, bool on);
void set_stream_options(int fd, std::size_t buffer_bytes);

// Blocking-with-deadline exact reads and writes (poll-based), used only during
// connection set-up. Throw IoError on error, EOF or deadline.
void write_all(int fd, std::span<const std::byte> data, const Deadline& deadline);
void read_exact(int fd, std::span<std::byte> data, const Deadline& deadline);

template <typename T>
std::span<const std::byte> bytes_of(const T& v) {
  return std::as_bytes(std::span<const T>(&v, 1));
}
template <typename T>
std::span<std::byte> writable_bytes_of(T& v) {
  return std::as_writable_bytes(std::span<T>(&v, 1));
}

}  // namespace chorus::tcp
