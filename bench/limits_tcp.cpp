// The loopback TCP exchange of chorus-limits (limits_tcp.hpp says what it
// bounds and why).
#include "limits_tcp.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "memcpy_limit.hpp"

namespace chorus_bench {
namespace {

// Elements per piece: 1 MiB of float32.
constexpr std::size_t kPieceElements = std::size_t{1} << 18;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "chorus-limits: xchg-tcp: %s: %s\n", what, std::strerror(errno));
  std::exit(2);
}

// A connected pair of non-blocking loopback TCP sockets.
std::pair<int, int> loopback_pair() {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    fail("listen on 127.0.0.1");
  const int a = socket(AF_INET, SOCK_STREAM, 0);
  if (a < 0 || connect(a, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("connect");
  const int b = accept(listener, nullptr, nullptr);
  if (b < 0) fail("accept");
  close(listener);
  for (const int fd : {a, b}) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return {a, b};
}

bool again(ssize_t rc) {
  return rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

// Sends `out` and receives as many bytes into `in` at once on `fd`.
void swap_bytes(int fd, const std::byte* out, std::byte* in, std::size_t n) {
  std::size_t sent = 0, got = 0;
  while (sent < n || got < n) {
    bool moved = false;
    if (sent < n) {
      const ssize_t w = send(fd, out + sent, n - sent, MSG_NOSIGNAL);
      if (w > 0) {
        sent += static_cast<std::size_t>(w);
        moved = true;
      } else if (!again(w)) {
        fail("send");
      }
    }
    if (got < n) {
      const ssize_t r = recv(fd, in + got, n - got, 0);
      if (r > 0) {
        got += static_cast<std::size_t>(r);
        moved = true;
      } else if (r == 0) {
        errno = ECONNRESET;
        fail("recv");
      } else if (!again(r)) {
        fail("recv");
      }
    }
    if (moved) continue;
    pollfd p{fd, static_cast<short>((sent < n ? POLLOUT : 0) | (got < n ? POLLIN : 0)), 0};
    if (poll(&p, 1, 60'000) == 0) {
      errno = ETIMEDOUT;
      fail("poll (the peer thread stopped)");
    }
  }
}

// A pattern that differs between the two threads and along the buffer.
float pattern(int thread, std::size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<std::size_t>(thread) * 3) % 200) -
                            100) *
         0.5f;
}

}  // namespace

double exchange_tcp(std::size_t bytes, int64_t reps, const std::vector<int>& cpus) {
  const std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float));
  const auto [fd0, fd1] = loopback_pair();
  double gbps[2] = {0, 0};
  std::barrier start(2);
  auto run = [&](int me) {
    pin_to_cpu(cpus[static_cast<std::size_t>(me) % cpus.size()]);
    const int fd = me == 0 ? fd0 : fd1;
    auto* src = static_cast<float*>(alloc_touched(count * sizeof(float)));
    auto* dst = static_cast<float*>(alloc_touched(count * sizeof(float)));
    for (std::size_t i = 0; i < count; ++i) src[i] = pattern(me, i);
    start.arrive_and_wait();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t r = 0; r < reps; ++r)
      for (std::size_t at = 0; at < count; at += kPieceElements) {
        const std::size_t n = std::min(kPieceElements, count - at);
        swap_bytes(fd, reinterpret_cast<const std::byte*>(src + at),
                   reinterpret_cast<std::byte*>(dst + at), n * sizeof(float));
      }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbps[me] =
        static_cast<double>(count * sizeof(float)) * static_cast<double>(reps) / seconds / 1e9;
    for (std::size_t i = 0; i < count; ++i)
      if (dst[i] != pattern(1 - me, i)) {
        std::fprintf(stderr, "chorus-limits: xchg-tcp: thread %d element %zu is %g, sent as %g\n",
                     me, i, static_cast<double>(dst[i]), static_cast<double>(pattern(1 - me, i)));
        std::exit(1);
      }
    std::free(src);
    std::free(dst);
  };
  std::thread first(run, 0), second(run, 1);  // the caller's affinity stays as it was
  first.join();
  second.join();
  close(fd0);
  close(fd1);
  return std::min(gbps[0], gbps[1]);
}

}  // namespace chorus_bench
