// Connection set-up of the TCP transport, and the handshake of every accepted
// connection (during set-up and, for strangers, afterwards).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "transports/tcp/epoll_ids.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace chorus::tcp {
namespace {

void epoll_add(int epfd, int fd, uint32_t events, uint64_t id) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
    throw IoError(CHORUS_ERR_IO, errno_message("epoll_ctl(ADD)", errno));
}

}  // namespace

TcpTransport::TcpTransport(Store& store, TcpOptions options)
    : options_(std::move(options)), peers_(options_.size) {
  CHORUS_CHECK(options_.rank >= 0 && options_.rank < options_.size, "rank {} of world size {}",
               options_.rank, options_.size);
  epoll_fd_ = Fd(epoll_create1(EPOLL_CLOEXEC));
  wake_fd_ = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd_ || !wake_fd_) throw IoError(CHORUS_ERR_IO, errno_message("epoll/eventfd", errno));
  for (auto& p : peers_) p.rx.stage.resize(64 * 1024);
  establish(store);
  epoll_add(epoll_fd_.get(), wake_fd_.get(), EPOLLIN, kWakeId);
  progress_ = std::thread([this] { progress_loop(); });
}

void TcpTransport::establish(Store& store) {
  const int me = options_.rank, n = options_.size;
  auto deadline = Deadline::after(std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(options_.connect_timeout_s)));
  listen_fd_ = listen_on(options_.bind_host, &listen_port_);
  epoll_add(epoll_fd_.get(), listen_fd_.get(), EPOLLIN, kListenId);
  const std::string my_addr = bootstrap::format_host_port(options_.bind_host, listen_port_);
  store.set(fmt::format("{}addr/{}", options_.key_prefix, me), my_addr);
  log().debug("rank {} listening on {}", me, my_addr);

  for (int j = 0; j < me; ++j) {
    std::string addr = store.get(fmt::format("{}addr/{}", options_.key_prefix, j), deadline);
    Fd fd = bootstrap::connect_with_retry(addr, deadline);
    set_stream_options(fd.get(), options_.socket_buffer);
    Hello hello = make_hello(options_.token, me, j, n);
    write_all(fd.get(), bytes_of(hello), deadline);
    HelloAck ack{};
    try {
      read_exact(fd.get(), writable_bytes_of(ack), deadline);
    } catch (const IoError& e) {
      throw IoError(CHORUS_ERR_BOOTSTRAP,
                    fmt::format("rank {} refused or dropped the connection from rank {} at {}: {}",
                                j, me, addr, e.what()));
    }
    if (ack.magic != kHelloMagic || ack.accepted_rank != me)
      throw IoError(CHORUS_ERR_BOOTSTRAP,
                    fmt::format("rank {} at {} sent an invalid ack", j, addr));
    peers_[j].fd = std::move(fd);
    peers_[j].address = addr;
  }

  auto missing = [&] {
    int count = 0;
    for (int j = me + 1; j < n; ++j) count += peers_[j].fd ? 0 : 1;
    return count;
  };
  epoll_event events[16];
  while (missing() > 0) {
    if (deadline.expired()) {
      std::string who;
      for (int j = me + 1; j < n; ++j)
        if (!peers_[j].fd) who += fmt::format("{}{}", who.empty() ? "" : ", ", j);
      throw IoError(
          CHORUS_ERR_TIMEOUT,
          fmt::format("rank {}: timed out waiting for connections from ranks {}", me, who));
    }
    int count = epoll_wait(epoll_fd_.get(), events, 16, deadline.poll_timeout_ms(100));
    for (int i = 0; i < count; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == kListenId) {
        accept_strangers();
      } else if (is_stranger_id(id)) {
        int fd = stranger_fd(id);
        for (std::size_t s = 0; s < strangers_.size(); ++s)
          if (strangers_[s].fd.get() == fd) {
            service_stranger(s, true);
            break;
          }
      }
    }
    expire_strangers();
  }
  // The listeners of the ranks that connected here, for probing them later
  // (tcp_probe.cpp): each published its address before it connected.
  for (int j = me + 1; j < n; ++j)
    peers_[j].address = store.get(fmt::format("{}addr/{}", options_.key_prefix, j), deadline);
  for (int j = 0; j < n; ++j)
    if (j != me) register_peer_fd(j);
  log().debug("rank {}: connected to all {} peers", me, n - 1);
}

void TcpTransport::register_peer_fd(int peer) {
  bootstrap::set_nonblocking(peers_[peer].fd.get());
  epoll_add(epoll_fd_.get(), peers_[peer].fd.get(), EPOLLIN | EPOLLRDHUP,
            static_cast<uint64_t>(peer));
}

void TcpTransport::accept_strangers() {
  while (true) {
    int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EINTR)
        log().warn("accept() failed: {}", errno_message("accept", errno));
      return;
    }
    Stranger s;
    s.fd = Fd(fd);
    s.address = peer_address(fd);
    s.deadline = Clock::now() + std::chrono::seconds(10);
    epoll_add(epoll_fd_.get(), fd, EPOLLIN, stranger_id(fd));
    strangers_.push_back(std::move(s));
  }
}

// Reads what has arrived of the stranger's Hello; once complete, either adopts
// the connection as a peer (only during set-up, only for an expected rank) or
// refuses it with a log line saying why.
void TcpTransport::service_stranger(std::size_t index, bool setup_phase) {
  Stranger& s = strangers_[index];
  std::string refusal;
  auto finish = [&] {
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, s.fd.get(), nullptr);
    strangers_.erase(strangers_.begin() + static_cast<std::ptrdiff_t>(index));
  };
  const auto purpose = [&s] { return static_cast<HelloPurpose>(s.hello.purpose); };
  if (s.received == sizeof(Hello)) {  // a probe or an ask, whose frame is still arriving
    if (!(purpose() == HelloPurpose::ask ? finish_ask(s, &refusal) : finish_probe(s, &refusal)))
      return;
  } else {
    auto* dst = reinterpret_cast<std::byte*>(&s.hello);
    ssize_t n = ::recv(s.fd.get(), dst + s.received, sizeof(Hello) - s.received, 0);
    if (n == 0) {
      refusal = "closed before completing the handshake";
    } else if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      refusal = errno_message("handshake read failed", errno);
    } else {
      s.received += static_cast<std::size_t>(n);
      if (s.received < sizeof(Hello)) return;
      auto error = validate_hello(std::as_bytes(std::span(&s.hello, 1)), options_.token,
                                  options_.rank, options_.size);
      int from = s.hello.from_rank;
      const bool probe = purpose() == HelloPurpose::probe;
      if (error) {
        refusal = *error;
      } else if (purpose() == HelloPurpose::ask) {  // after set-up only (tcp_recover.cpp)
        if (setup_phase)
          refusal = fmt::format("an ask from rank {} during set-up", from);
        else if (!finish_ask(s, &refusal))
          return;          // its frame is still arriving
      } else if (probe) {  // after set-up only: a peer asks whether this rank is alive
        if (setup_phase)
          refusal = fmt::format("a probe from rank {} during set-up", from);
        else if (answer_probe(s, &refusal) && !finish_probe(s, &refusal))
          return;  // its notice is still arriving
      } else if (purpose() != HelloPurpose::connect) {
        refusal = fmt::format("a hello of unknown purpose {} from rank {}", s.hello.purpose, from);
      } else if (!setup_phase) {
        refusal = fmt::format("claims to be rank {}, but set-up is over", from);
      } else if (from <= options_.rank || peers_[from].fd) {
        refusal =
            fmt::format("claims to be rank {}, which does not connect to rank {} or already did",
                        from, options_.rank);
      } else {
        HelloAck ack{kHelloMagic, from};
        try {
          write_all(s.fd.get(), bytes_of(ack), Deadline::after(std::chrono::seconds(5)));
        } catch (const IoError& e) {
          refusal = e.what();
        }
        if (refusal.empty()) {
          epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, s.fd.get(), nullptr);
          set_stream_options(s.fd.get(), options_.socket_buffer);
          peers_[from].fd = std::move(s.fd);
          strangers_.erase(strangers_.begin() + static_cast<std::ptrdiff_t>(index));
          return;
        }
      }
    }
  }
  if (refusal.empty()) {  // a probe or an ask, answered
    finish();
    return;
  }
  log().warn("rank {}: refused connection from {}: {}", options_.rank, s.address, refusal);
  finish();
}

void TcpTransport::expire_strangers() {
  auto now = Clock::now();
  for (std::size_t i = 0; i < strangers_.size();) {
    if (strangers_[i].deadline <= now) {
      log().warn("rank {}: refused connection from {}: no handshake within 10 s", options_.rank,
                 strangers_[i].address);
      epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, strangers_[i].fd.get(), nullptr);
      strangers_.erase(strangers_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

}  // namespace chorus::tcp
