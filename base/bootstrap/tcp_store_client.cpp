// The TCP store client. Requests of several threads share one socket: each
// carries an id and replies are matched by id. Whichever waiting thread finds
// no reader becomes the reader (leader/follower), so there is no extra thread
// and a blocked GET of one thread never holds up a SET of another.
#include <netdb.h>
#include <poll.h>
#include <unistd.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include "base/bootstrap/net.hpp"
#include "base/bootstrap/store_wire.hpp"
#include "base/bootstrap/tcp_store.hpp"
#include "base/core/config.hpp"
#include "base/core/error.hpp"
#include "base/core/log.hpp"

namespace chorus {

using bootstrap::UniqueFd;
using namespace bootstrap::wire;

namespace {

// The server answers a timed-out wait itself (naming the missing keys); the
// client waits this much longer for that answer before giving up on its own.
constexpr auto kReplyGrace = std::chrono::seconds(2);
// Authentication gets at least this long even when the connect used most of the deadline.
constexpr auto kMinAuthTime = std::chrono::seconds(5);

struct Reply {
  Op op = Op::kReplyOk;
  int64_t arg = 0;
  std::string value;
};

}  // namespace

struct TcpStoreClient::Impl {
  std::string addr;
  UniqueFd fd;
  std::mutex send_mu;  // one whole frame at a time on the socket
  std::mutex mu;       // guards everything below
  std::condition_variable cv;
  uint32_t next_id = 1;
  bool reader_active = false;
  bool broken = false;
  std::string broken_reason;
  std::map<uint32_t, Reply> replies;
  std::set<uint32_t> abandoned;  // timed out locally; drop their late replies
  std::string rbuf;              // touched only by the active reader

  [[noreturn]] void throw_broken() {
    throw IoError(CHORUS_ERR_BOOTSTRAP,
                  fmt::format("lost connection to the store at {}: {}", addr, broken_reason));
  }

  void mark_broken(const std::string& reason) {
    std::lock_guard lock(mu);
    if (!broken) {
      broken = true;
      broken_reason = reason;
      logger("bootstrap").debug("store client {}: {}", addr, reason);
    }
    cv.notify_all();
  }

  uint32_t send(Op op, std::string_view key, std::string_view value, int64_t arg,
                const Deadline& deadline) {
    if (key.size() > kMaxKeyBytes)
      throw UsageError(fmt::format("store key of {} bytes exceeds {}", key.size(), kMaxKeyBytes));
    if (value.size() > kMaxValueBytes)
      throw UsageError(
          fmt::format("store value of {} bytes exceeds {}", value.size(), kMaxValueBytes));
    uint32_t id;
    {
      std::lock_guard lock(mu);
      if (broken) throw_broken();
      id = next_id++;
    }
    std::string frame = encode_frame(op, id, key, value, arg);
    std::lock_guard lock(send_mu);
    int err = bootstrap::write_all(fd.get(), frame, deadline);
    if (err != 0) {
      // A partly written frame leaves the stream unusable.
      mark_broken(errno_message("send", err));
      std::lock_guard l(mu);
      throw_broken();
    }
    return id;
  }

  // Reads whatever the socket has (waiting until the deadline for something)
  // and files complete replies. Called by the single active reader only.
  void read_some(const Deadline& deadline) {
    pollfd p{fd.get(), POLLIN, 0};
    int r = poll(&p, 1, deadline.poll_timeout_ms());
    if (r < 0 && errno != EINTR) return mark_broken(errno_message("poll", errno));
    if (r <= 0) return;
    char chunk[64 * 1024];
    for (;;) {
      ssize_t n = recv(fd.get(), chunk, sizeof chunk, 0);
      if (n > 0) {
        rbuf.append(chunk, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) return mark_broken("the store closed the connection");
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return mark_broken(errno_message("recv", errno));
    }
    size_t off = 0;
    std::vector<std::pair<uint32_t, Reply>> got;
    while (rbuf.size() - off >= kHeaderSize) {
      Header h;
      if (auto err = decode_header(rbuf.data() + off, &h))
        return mark_broken("malformed reply: " + *err);
      if (!is_reply(h.op) || h.key_len != 0) return mark_broken("malformed reply: not a reply");
      if (rbuf.size() - off < h.frame_size()) break;
      got.push_back({h.id, Reply{h.op, h.arg, rbuf.substr(off + kHeaderSize, h.value_len)}});
      off += h.frame_size();
    }
    rbuf.erase(0, off);
    std::lock_guard lock(mu);
    for (auto& [id, reply] : got) {
      if (abandoned.erase(id)) continue;
      replies[id] = std::move(reply);
    }
  }

  // The reply to request id, or nullopt when the deadline passed first.
  std::optional<Reply> await(uint32_t id, const Deadline& deadline) {
    std::unique_lock lock(mu);
    for (;;) {
      if (auto it = replies.find(id); it != replies.end()) {
        Reply r = std::move(it->second);
        replies.erase(it);
        return r;
      }
      if (broken) throw_broken();
      if (deadline.expired()) {
        abandoned.insert(id);
        return std::nullopt;
      }
      if (!reader_active) {
        reader_active = true;
        lock.unlock();
        try {
          read_some(deadline);
        } catch (...) {
          lock.lock();
          reader_active = false;
          cv.notify_all();
          throw;
        }
        lock.lock();
        reader_active = false;
        cv.notify_all();  // replies may have arrived for others; one of them reads next
      } else {
        cv.wait_until(lock, deadline.time_point());
      }
    }
  }

  Reply request(Op op, std::string_view key, std::string_view value, int64_t arg,
                const Deadline& deadline, const std::string& what) {
    uint32_t id = send(op, key, value, arg, deadline);
    auto reply = await(id, deadline);
    if (!reply)
      throw IoError(CHORUS_ERR_TIMEOUT,
                    fmt::format("store {} at {}: no reply before the deadline", what, addr));
    if (reply->op == Op::kReplyError)
      throw UsageError(fmt::format("store {} at {}: {}", what, addr, reply->value));
    return std::move(*reply);
  }
};

TcpStoreClient::TcpStoreClient(const std::string& addr, const std::string& token,
                               const Deadline& deadline)
    : impl_(std::make_unique<Impl>()) {
  impl_->addr = addr;
  impl_->fd = bootstrap::connect_with_retry(addr, deadline);
  Deadline auth_deadline = Deadline::after(kMinAuthTime);
  if (deadline.time_point() > auth_deadline.time_point()) auth_deadline = deadline;
  uint32_t id = impl_->send(Op::kAuth, {}, token, 0, auth_deadline);
  auto reply = impl_->await(id, auth_deadline);
  if (!reply)
    throw IoError(CHORUS_ERR_BOOTSTRAP,
                  fmt::format("the store at {} did not answer the authentication", addr));
  if (reply->op != Op::kReplyOk)
    throw IoError(CHORUS_ERR_BOOTSTRAP,
                  fmt::format("the store at {} refused this process: {} (is CHORUS_JOB_TOKEN the "
                              "one of this job?)",
                              addr, reply->value));
}

TcpStoreClient::~TcpStoreClient() = default;

const std::string& TcpStoreClient::address() const {
  return impl_->addr;
}

std::string TcpStoreClient::local_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(impl_->fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) < 0)
    throw IoError(CHORUS_ERR_IO, errno_message("getsockname", errno));
  return bootstrap::numeric_host(reinterpret_cast<sockaddr*>(&ss), len);
}

namespace {

// SET and ADD have no deadline in the Store interface; CHORUS_TIMEOUT bounds them.
Deadline op_deadline() {
  return Deadline::after(std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(global_config().timeout_s)));
}

}  // namespace

void TcpStoreClient::set(const std::string& key, const std::string& value) {
  impl_->request(Op::kSet, key, value, 0, op_deadline(), fmt::format("set of key '{}'", key));
}

int64_t TcpStoreClient::add(const std::string& key, int64_t delta) {
  return impl_
      ->request(Op::kAdd, key, {}, delta, op_deadline(), fmt::format("add to key '{}'", key))
      .arg;
}

namespace {

int64_t wait_ms(const Deadline& deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline.remaining()).count();
}

}  // namespace

std::string TcpStoreClient::get(const std::string& key, const Deadline& deadline) {
  auto start = Clock::now();
  uint32_t id = impl_->send(Op::kGet, key, {}, wait_ms(deadline), deadline);
  auto reply = impl_->await(id, Deadline::at(deadline.time_point() + kReplyGrace));
  if (!reply || reply->op == Op::kReplyTimeout)
    throw IoError(CHORUS_ERR_TIMEOUT,
                  fmt::format("store get: key '{}' did not appear at the store {} within {:.1f} s",
                              key, impl_->addr, seconds_since(start)));
  if (reply->op == Op::kReplyError)
    throw UsageError(
        fmt::format("store get of key '{}' at {}: {}", key, impl_->addr, reply->value));
  return std::move(reply->value);
}

void TcpStoreClient::wait(const std::vector<std::string>& keys, const Deadline& deadline) {
  if (keys.empty()) return;
  auto start = Clock::now();
  std::string list = encode_key_list(keys);
  if (list.size() > kMaxValueBytes) throw UsageError("store wait: too many keys in one call");
  uint32_t id = impl_->send(Op::kWait, {}, list, wait_ms(deadline), deadline);
  auto reply = impl_->await(id, Deadline::at(deadline.time_point() + kReplyGrace));
  if (reply && reply->op == Op::kReplyOk) return;
  if (reply && reply->op == Op::kReplyError)
    throw UsageError(fmt::format("store wait at {}: {}", impl_->addr, reply->value));
  std::vector<std::string> missing = keys;
  if (reply) decode_key_list(reply->value, &missing);
  throw IoError(CHORUS_ERR_TIMEOUT,
                fmt::format("store wait: key(s) {} did not appear at the store {} within {:.1f} s",
                            describe_keys(missing), impl_->addr, seconds_since(start)));
}

std::unique_ptr<Store> connect_tcp_store(const std::string& addr, const std::string& token,
                                         const Deadline& deadline) {
  return std::make_unique<TcpStoreClient>(addr, token, deadline);
}

std::string local_address_towards(const std::string& store_addr) {
  auto hp = bootstrap::parse_host_port(store_addr);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  // Port 0 cannot be connected to; any port gives the same route.
  std::string port = std::to_string(hp.port == 0 ? 9 : hp.port);
  int gai = getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &res);
  if (gai != 0)
    throw IoError(CHORUS_ERR_BOOTSTRAP, fmt::format("cannot resolve the store host '{}': {}",
                                                    hp.host, gai_strerror(gai)));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  std::string last = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd.valid() || connect(fd.get(), ai->ai_addr, ai->ai_addrlen) < 0) {
      last = errno_message("connect", errno);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) == 0)
      return bootstrap::numeric_host(reinterpret_cast<sockaddr*>(&ss), len);
    last = errno_message("getsockname", errno);
  }
  throw IoError(CHORUS_ERR_BOOTSTRAP,
                fmt::format("no local address routes to the store at {}: {}", store_addr, last));
}

}  // namespace chorus
