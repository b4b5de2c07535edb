// The TCP store server: one thread, poll() over the listening socket, an
// eventfd for shutdown and every client connection. All store state is owned
// by that thread, so it needs no locks.
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <list>
#include <map>
#include <thread>
#include <unordered_map>

#include "base/bootstrap/net.hpp"
#include "base/bootstrap/store_wire.hpp"
#include "base/bootstrap/tcp_store.hpp"
#include "base/core/error.hpp"
#include "base/core/log.hpp"

namespace chorus {

using bootstrap::UniqueFd;
using namespace bootstrap::wire;
using std::chrono::milliseconds;

namespace {

constexpr size_t kMaxConnections = 4096;
// Before authentication only a small AUTH frame is accepted, so an unknown
// peer cannot make the server buffer a large body.
constexpr uint32_t kMaxTokenBytes = 4096;
constexpr auto kAuthTimeout = std::chrono::seconds(30);
// A client that stops reading its replies is dropped rather than buffered forever.
constexpr size_t kMaxPendingOutput = 256u << 20;
constexpr int64_t kMaxWaitMs = int64_t{7} * 24 * 3600 * 1000;

struct Conn {
  uint64_t id = 0;
  UniqueFd fd;
  std::string peer;
  bool authed = false;
  bool closing = false;  // flush the pending reply, then close
  bool dead = false;
  Clock::time_point close_by;  // auth deadline, or flush deadline when closing
  std::string in;
  size_t in_off = 0;
  std::string out;
  size_t out_off = 0;
};

struct Waiter {
  uint64_t conn = 0;
  uint32_t request = 0;
  bool is_get = false;
  std::string get_key;
  std::vector<std::string> missing;
  Clock::time_point deadline;
};

bool token_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  // No early exit on the first mismatch: the time does not reveal the prefix.
  unsigned diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  return diff == 0;
}

}  // namespace

struct TcpStoreServer::Impl {
  std::string token;
  std::string host;
  uint16_t port = 0;
  UniqueFd listen_fd;
  UniqueFd wake_fd;
  std::thread thread;
  std::atomic<int64_t> refused{0};
  std::atomic<int64_t> connected{0};

  // Owned by the server thread.
  std::unordered_map<std::string, std::string> data;
  std::map<uint64_t, std::unique_ptr<Conn>> conns;
  uint64_t next_conn = 1;
  std::list<Waiter> waiters;
  Clock::time_point accept_paused_until{};
  std::vector<char> buf = std::vector<char>(64 * 1024);

  spdlog::logger& log = logger("bootstrap");

  void run();
  void accept_all();
  void on_readable(Conn& c);
  void process(Conn& c);
  void handle(Conn& c, const Header& h, std::string_view key, std::string_view value);
  void reply(Conn& c, Op op, uint32_t request, std::string_view value, int64_t arg = 0);
  void flush(Conn& c);
  void notify(const std::string& key);
  void expire(Clock::time_point now);
  void drop(Conn& c, const std::string& reason) {
    if (c.dead) return;
    log.warn("store: dropping client {}: {}", c.peer, reason);
    refused.fetch_add(1);
    c.dead = true;
  }
};

TcpStoreServer::TcpStoreServer(std::string token, const std::string& host, uint16_t port)
    : impl_(std::make_unique<Impl>()) {
  auto& m = *impl_;
  m.token = std::move(token);
  m.host = host;
  std::string where = bootstrap::format_host_port(host, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port_text = std::to_string(port);
  int gai = getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(), &hints, &res);
  if (gai != 0)
    throw IoError(CHORUS_ERR_BOOTSTRAP,
                  fmt::format("store: cannot resolve {}: {}", where, gai_strerror(gai)));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  UniqueFd fd(socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) throw IoError(CHORUS_ERR_BOOTSTRAP, errno_message("store: socket", errno));
  int one = 1;
  // Lets a restarted job reuse a fixed port (MASTER_PORT) still in TIME_WAIT.
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd.get(), res->ai_addr, res->ai_addrlen) < 0 || listen(fd.get(), SOMAXCONN) < 0)
    throw IoError(CHORUS_ERR_BOOTSTRAP,
                  errno_message(fmt::format("store: cannot listen on {}", where), errno));
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  m.port = bootstrap::socket_port(reinterpret_cast<sockaddr*>(&ss));
  m.listen_fd = std::move(fd);
  m.wake_fd = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!m.wake_fd.valid()) throw IoError(CHORUS_ERR_IO, errno_message("store: eventfd", errno));
  m.thread = std::thread([&m] { m.run(); });
  m.log.debug("store: serving on {}", address());
}

TcpStoreServer::~TcpStoreServer() {
  uint64_t one = 1;
  if (write(impl_->wake_fd.get(), &one, sizeof one) < 0) {
    // eventfd writes only fail on counter overflow; the thread is woken anyway.
  }
  if (impl_->thread.joinable()) impl_->thread.join();
}

uint16_t TcpStoreServer::port() const {
  return impl_->port;
}
std::string TcpStoreServer::address() const {
  return bootstrap::format_host_port(impl_->host, impl_->port);
}
int64_t TcpStoreServer::connections_refused() const {
  return impl_->refused.load();
}
int64_t TcpStoreServer::clients_connected() const {
  return impl_->connected.load();
}

void TcpStoreServer::Impl::run() {
  std::vector<pollfd> fds;
  std::vector<Conn*> polled;
  try {
    for (;;) {
      auto now = Clock::now();
      // Sleep until the next event that needs the clock: a waiter's deadline,
      // an authentication or flush deadline, or the end of an accept pause.
      Clock::time_point wake = Clock::time_point::max();
      for (auto& w : waiters) wake = std::min(wake, w.deadline);
      for (auto& [id, c] : conns)
        if (!c->authed || c->closing) wake = std::min(wake, c->close_by);
      bool accepting = now >= accept_paused_until;
      if (!accepting) wake = std::min(wake, accept_paused_until);
      int timeout = -1;
      if (wake != Clock::time_point::max()) timeout = Deadline::at(wake).poll_timeout_ms(60 * 1000);

      fds.clear();
      polled.clear();
      fds.push_back({wake_fd.get(), POLLIN, 0});
      fds.push_back({listen_fd.get(), static_cast<short>(accepting ? POLLIN : 0), 0});
      for (auto& [id, c] : conns) {
        short ev = c->closing ? 0 : POLLIN;
        if (c->out_off < c->out.size()) ev |= POLLOUT;
        fds.push_back({c->fd.get(), ev, 0});
        polled.push_back(c.get());
      }
      int n = poll(fds.data(), fds.size(), timeout);
      if (n < 0 && errno != EINTR) throw IoError(CHORUS_ERR_IO, errno_message("poll", errno));
      if (n > 0) {
        if (fds[0].revents) break;  // shutdown
        if (fds[1].revents & POLLIN) accept_all();
        for (size_t i = 0; i < polled.size(); ++i) {
          short re = fds[i + 2].revents;
          Conn& c = *polled[i];
          if (c.dead) continue;
          if (re & (POLLIN | POLLHUP | POLLERR)) {
            if (c.closing)
              c.dead = true;  // the peer went away before reading the refusal
            else
              on_readable(c);
          }
        }
      }
      now = Clock::now();
      expire(now);
      for (auto& [id, c] : conns) {
        if (c->dead) continue;
        if (c->out_off < c->out.size()) flush(*c);
        if (c->closing && c->out_off >= c->out.size()) c->dead = true;
        if (!c->dead && (!c->authed || c->closing) && now >= c->close_by)
          drop(*c, c->closing ? "did not read its refusal" : "did not authenticate in time");
      }
      for (auto it = conns.begin(); it != conns.end();) {
        if (!it->second->dead) {
          ++it;
          continue;
        }
        uint64_t id = it->first;
        waiters.remove_if([id](const Waiter& w) { return w.conn == id; });
        it = conns.erase(it);
        connected.fetch_sub(1);
      }
    }
  } catch (const std::exception& e) {
    // Only resource exhaustion gets here; clients see the connection close.
    log.error("store: server thread stopped: {}", e.what());
  }
  conns.clear();
  connected.store(0);
}

void TcpStoreServer::Impl::accept_all() {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = accept4(listen_fd.get(), reinterpret_cast<sockaddr*>(&ss), &len,
                     SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // Out of descriptors: the pending connection would make poll return at
      // once forever, so stop accepting for a moment instead of spinning.
      log.warn("store: {}; pausing accept for 100 ms", errno_message("accept", errno));
      accept_paused_until = Clock::now() + milliseconds(100);
      return;
    }
    auto c = std::make_unique<Conn>();
    c->fd = UniqueFd(fd);
    auto* sa = reinterpret_cast<sockaddr*>(&ss);
    c->peer =
        bootstrap::format_host_port(bootstrap::numeric_host(sa, len), bootstrap::socket_port(sa));
    if (conns.size() >= kMaxConnections) {
      log.warn("store: refusing {}: already {} clients", c->peer, conns.size());
      refused.fetch_add(1);
      continue;
    }
    bootstrap::set_nodelay(fd);
    c->id = next_conn++;
    c->close_by = Clock::now() + kAuthTimeout;
    log.debug("store: client {} connected", c->peer);
    conns.emplace(c->id, std::move(c));
    connected.fetch_add(1);
  }
}

void TcpStoreServer::Impl::on_readable(Conn& c) {
  // Bounded per wake-up so that one busy client cannot starve the others.
  for (int round = 0; round < 16 && !c.dead && !c.closing; ++round) {
    ssize_t n = recv(c.fd.get(), buf.data(), buf.size(), 0);
    if (n > 0) {
      c.in.append(buf.data(), static_cast<size_t>(n));
      process(c);
      continue;
    }
    if (n == 0) {
      log.debug("store: client {} disconnected", c.peer);
      c.dead = true;
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    log.debug("store: client {}: {}", c.peer, errno_message("recv", errno));
    c.dead = true;
    return;
  }
}

void TcpStoreServer::Impl::process(Conn& c) {
  while (!c.dead && !c.closing) {
    size_t avail = c.in.size() - c.in_off;
    if (avail < kHeaderSize) break;
    Header h;
    if (auto err = decode_header(c.in.data() + c.in_off, &h)) return drop(c, *err);
    if (!is_request(h.op)) return drop(c, "sent a reply frame");
    if (!c.authed && (h.op != Op::kAuth || h.key_len != 0 || h.value_len > kMaxTokenBytes))
      return drop(c, "first message was not a job-token authentication");
    if (avail < h.frame_size()) break;
    const char* body = c.in.data() + c.in_off + kHeaderSize;
    handle(c, h, {body, h.key_len}, {body + h.key_len, h.value_len});
    c.in_off += h.frame_size();
  }
  if (c.in_off == c.in.size()) {
    c.in.clear();
    c.in_off = 0;
  } else if (c.in_off > (1u << 20)) {
    c.in.erase(0, c.in_off);
    c.in_off = 0;
  }
}

void TcpStoreServer::Impl::handle(Conn& c, const Header& h, std::string_view key,
                                  std::string_view value) {
  auto wait_deadline = [&] {
    return Clock::now() + milliseconds(std::clamp<int64_t>(h.arg, 0, kMaxWaitMs));
  };
  switch (h.op) {
    case Op::kAuth:
      if (c.authed) return drop(c, "authenticated twice");
      if (!token.empty() && !token_equal(value, token)) {
        log.warn("store: refused client {}: wrong job token", c.peer);
        refused.fetch_add(1);
        reply(c, Op::kReplyError, h.id, "wrong job token");
        c.closing = true;
        c.close_by = Clock::now() + milliseconds(1000);
        return;
      }
      c.authed = true;
      return reply(c, Op::kReplyOk, h.id, {});
    case Op::kSet: {
      std::string k(key);
      data[k] = std::string(value);
      reply(c, Op::kReplyOk, h.id, {});
      return notify(k);
    }
    case Op::kGet: {
      auto it = data.find(std::string(key));
      if (it != data.end()) return reply(c, Op::kReplyOk, h.id, it->second);
      waiters.push_back({c.id, h.id, true, std::string(key), {std::string(key)}, wait_deadline()});
      return;
    }
    case Op::kWait: {
      std::vector<std::string> keys;
      if (!decode_key_list(value, &keys)) return drop(c, "malformed key list in WAIT");
      std::vector<std::string> missing;
      for (auto& k : keys)
        if (!data.count(k)) missing.push_back(std::move(k));
      if (missing.empty()) return reply(c, Op::kReplyOk, h.id, {});
      waiters.push_back({c.id, h.id, false, {}, std::move(missing), wait_deadline()});
      return;
    }
    case Op::kAdd: {
      std::string k(key);
      int64_t current = 0;
      auto it = data.find(k);
      if (it != data.end()) {
        const std::string& s = it->second;
        auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), current);
        if (ec != std::errc() || ptr != s.data() + s.size())
          return reply(c, Op::kReplyError, h.id,
                       fmt::format("the value at key '{}' is not an integer", k));
      }
      int64_t result = 0;
      if (__builtin_add_overflow(current, h.arg, &result))
        return reply(c, Op::kReplyError, h.id, fmt::format("add overflows at key '{}'", k));
      data[k] = std::to_string(result);
      reply(c, Op::kReplyOk, h.id, {}, result);
      return notify(k);
    }
    default:
      return drop(c, "unexpected op");
  }
}

void TcpStoreServer::Impl::reply(Conn& c, Op op, uint32_t request, std::string_view value,
                                 int64_t arg) {
  if (c.dead) return;
  if (c.out.size() - c.out_off > kMaxPendingOutput)
    return drop(c, "does not read its replies (too much pending output)");
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
  }
  c.out += encode_frame(op, request, {}, value, arg);
}

void TcpStoreServer::Impl::flush(Conn& c) {
  while (c.out_off < c.out.size()) {
    ssize_t n = send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    log.debug("store: client {}: {}", c.peer, errno_message("send", errno));
    c.dead = true;
    return;
  }
  c.out.clear();
  c.out_off = 0;
}

void TcpStoreServer::Impl::notify(const std::string& key) {
  for (auto it = waiters.begin(); it != waiters.end();) {
    auto& m = it->missing;
    m.erase(std::remove(m.begin(), m.end(), key), m.end());
    if (!m.empty()) {
      ++it;
      continue;
    }
    auto c = conns.find(it->conn);
    if (c != conns.end())
      reply(*c->second, Op::kReplyOk, it->request, it->is_get ? data[it->get_key] : "");
    it = waiters.erase(it);
  }
}

void TcpStoreServer::Impl::expire(Clock::time_point now) {
  for (auto it = waiters.begin(); it != waiters.end();) {
    if (it->deadline > now) {
      ++it;
      continue;
    }
    auto c = conns.find(it->conn);
    if (c != conns.end())
      reply(*c->second, Op::kReplyTimeout, it->request, encode_key_list(it->missing));
    it = waiters.erase(it);
  }
}

}  // namespace chorus
