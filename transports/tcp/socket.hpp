// Socket helpers of the TCP transport, on top of base/bootstrap/net.hpp (file
// descriptors, host:port parsing, connecting with retry, writing with a
// deadline), adding what connection set-up needs: a listener on an ephemeral
// port, socket tuning, and exact reads/writes that throw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/bootstrap/net.hpp"
#include "base/core/deadline.hpp"

namespace chorus::tcp {

using Fd = bootstrap::UniqueFd;

// Listens on host (numeric address) with a kernel-chosen port; non-blocking.
Fd listen_on(const std::string& host, uint16_t* port_out);

// TCP_NODELAY, and SO_SNDBUF/SO_RCVBUF when buffer_bytes > 0.
void set_stream_options(int fd, std::size_t buffer_bytes);

// "host:port" of the other end of a connected socket ("unknown" on error).
std::string peer_address(int fd);

// Exact writes and reads with a deadline (poll-based), used during connection
// set-up. Throw IoError on error, EOF or deadline.
void write_all(int fd, std::span<const std::byte> data, const Deadline& deadline);
void read_exact(int fd, std::span<std::byte> data, const Deadline& deadline);

// Appends what the socket has to `in`, up to `want` more bytes, without
// waiting. Returns false on EOF or an error (in *error), true otherwise.
bool read_some(int fd, std::vector<std::byte>& in, std::size_t want, std::string* error);

template <typename T>
std::span<const std::byte> bytes_of(const T& v) {
  return std::as_bytes(std::span<const T>(&v, 1));
}
template <typename T>
std::span<std::byte> writable_bytes_of(T& v) {
  return std::as_writable_bytes(std::span<T>(&v, 1));
}

}  // namespace chorus::tcp
