#include "tools/sim/sim_transport.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <utility>

#include "base/core/completion.hpp"
#include "base/core/error.hpp"

namespace chorus::sim {
namespace {

constexpr uint32_t kWaiting = 0, kMatched = 1, kFailed = 2;

class SimRequest : public Request {
 public:
  using Request::Request;
  std::span<std::byte> recv_data;
  double arrival = 0;
  std::atomic<uint32_t> state{kWaiting};
};
using SimPtr = std::shared_ptr<SimRequest>;

struct Message {
  int src = 0;
  CallSignature sig;
  std::vector<std::byte> data;
  double arrival = 0;
};

struct Channel {
  std::deque<Message> messages;  // sent, not yet received
  std::deque<SimPtr> recvs;      // posted, not yet matched
};

}  // namespace

// The channels into one rank, by (source, tag), under their own lock: ranks
// that exchange messages with different peers do not contend.
struct Inbox {
  std::mutex mutex;
  std::map<std::pair<int, uint32_t>, Channel> channels;
};

struct SimFabric::State {
  std::mutex net_mutex;  // guards net's link calendars
  NetClock net;
  std::unique_ptr<Inbox[]> inboxes;  // per destination rank
  std::mutex abort_mutex;            // guards the abort code and message until aborted is set
  std::atomic<bool> aborted{false};
  chorus_result_t abort_code = CHORUS_ERR_ABORTED;
  std::string abort_message;

  State(NetParams params, std::vector<int> host_of)
      : net(params, host_of), inboxes(std::make_unique<Inbox[]>(host_of.size())) {}

  // Fails `r` with the abort's error if the fabric was aborted.
  bool refuse(Request& r) {
    if (!aborted.load()) return false;
    r.completion().fail(io_error(abort_code, abort_message));
    return true;
  }

  // With the inbox's mutex held: delivers `m` into `r` (or fails it). Returns whether
  // the sizes and signatures matched.
  static bool deliver(Message& m, SimRequest& r, int dst) {
    if (!(m.sig == r.signature()) || m.data.size() != r.recv_data.size()) {
      r.completion().fail(
          io_error(CHORUS_ERR_MISMATCH,
                   fmt::format("rank {} sent {} bytes of {} but rank {} expected {} bytes of {}",
                               m.src, m.data.size(), describe(m.sig), dst, r.recv_data.size(),
                               describe(r.signature()))));
      r.state.store(kFailed, std::memory_order_release);
      return false;
    }
    if (!m.data.empty()) std::memcpy(r.recv_data.data(), m.data.data(), m.data.size());
    r.arrival = m.arrival;
    r.state.store(kMatched, std::memory_order_release);
    return true;
  }
};

SimFabric::SimFabric(NetParams params, std::vector<int> host_of_rank)
    : size_(static_cast<int>(host_of_rank.size())),
      clocks_(host_of_rank.size(), 0.0),
      state_(std::make_unique<State>(params, std::move(host_of_rank))) {}

SimFabric::~SimFabric() = default;

void SimFabric::reset(double scale) {
  std::lock_guard lock(state_->net_mutex);
  std::fill(clocks_.begin(), clocks_.end(), 0.0);
  state_->net.reset();
  for (int r = 0; r < size_; ++r) {
    std::lock_guard in(state_->inboxes[r].mutex);
    state_->inboxes[r].channels.clear();
  }
  state_->aborted = false;
  scale_ = scale;
}

double SimFabric::makespan() const {
  return clocks_.empty() ? 0.0 : *std::max_element(clocks_.begin(), clocks_.end());
}

void SimFabric::fail_all(chorus_result_t code, const std::string& message) {
  std::vector<SimPtr> woken;
  {
    std::lock_guard lock(state_->abort_mutex);
    if (state_->aborted.load()) return;
    state_->abort_code = code;
    state_->abort_message = message;
    state_->aborted.store(true);
  }
  // A receive posted from now on fails when posted (refuse, under its inbox's lock).
  for (int dst = 0; dst < size_; ++dst) {
    std::lock_guard lock(state_->inboxes[dst].mutex);
    for (auto& [key, ch] : state_->inboxes[dst].channels)
      for (auto& r : ch.recvs) {
        r->completion().fail(io_error(code, message));
        r->state.store(kFailed, std::memory_order_release);
        woken.push_back(r);
      }
    state_->inboxes[dst].channels.clear();
  }
  for (auto& r : woken) futex_wake_all(r->state);
}

SimTransport::SimTransport(std::shared_ptr<SimFabric> fabric, int rank)
    : fabric_(std::move(fabric)), rank_(rank) {
  CHORUS_CHECK(fabric_ && rank >= 0 && rank < fabric_->size(), "sim rank {} of {}", rank,
               fabric_ ? fabric_->size() : 0);
}

SimTransport::~SimTransport() = default;

RequestPtr SimTransport::isend(int peer, uint32_t tag, const CallSignature& sig,
                               std::span<const std::byte> data) {
  CHORUS_CHECK(can_connect(peer), "rank {}: send to rank {} of {}", rank_, peer, size());
  auto req = std::make_shared<SimRequest>(peer, true, tag, sig, data.size());
  auto& st = *fabric_->state_;
  SimPtr woken;
  if (st.refuse(*req)) return req;
  Message m;
  m.src = rank_;
  m.sig = sig;
  m.data.assign(data.begin(), data.end());
  const double bytes = static_cast<double>(data.size()) * fabric_->scale_;
  if (st.net.host_of(rank_) == st.net.host_of(peer)) {  // books nothing
    m.arrival = st.net.send(rank_, peer, fabric_->clock(rank_), bytes);
  } else {
    std::lock_guard lock(st.net_mutex);
    m.arrival = st.net.send(rank_, peer, fabric_->clock(rank_), bytes);
  }
  {
    Inbox& inbox = st.inboxes[peer];
    std::lock_guard lock(inbox.mutex);
    Channel& ch = inbox.channels[{rank_, tag}];
    if (ch.recvs.empty()) {
      ch.messages.push_back(std::move(m));
    } else {
      woken = std::move(ch.recvs.front());
      ch.recvs.pop_front();
      if (!SimFabric::State::deliver(m, *woken, peer))
        req->completion().fail(
            io_error(CHORUS_ERR_MISMATCH, "message refused by rank " + std::to_string(peer)));
    }
  }
  if (woken) futex_wake_all(woken->state);
  if (!req->completion().failed()) req->completion().complete();
  return req;
}

RequestPtr SimTransport::irecv(int peer, uint32_t tag, const CallSignature& sig,
                               std::span<std::byte> data) {
  CHORUS_CHECK(can_connect(peer), "rank {}: receive from rank {} of {}", rank_, peer, size());
  auto req = std::make_shared<SimRequest>(peer, false, tag, sig, data.size());
  req->recv_data = data;
  auto& st = *fabric_->state_;
  Inbox& inbox = st.inboxes[rank_];
  std::lock_guard lock(inbox.mutex);
  if (st.refuse(*req)) return req;
  Channel& ch = inbox.channels[{peer, tag}];
  if (ch.messages.empty()) {
    ch.recvs.push_back(req);
  } else {
    SimFabric::State::deliver(ch.messages.front(), *req, rank_);
    ch.messages.pop_front();
  }
  return req;
}

void SimTransport::wait_for_progress(Request& pending, std::chrono::nanoseconds timeout) {
  if (pending.is_send()) return;  // sends complete at once (or fail)
  auto& r = static_cast<SimRequest&>(pending);
  uint32_t s = r.state.load(std::memory_order_acquire);
  if (s == kWaiting) {
    futex_wait(r.state, kWaiting, timeout);
    s = r.state.load(std::memory_order_acquire);
  }
  if (s != kMatched || r.done()) return;
  double& clock = fabric_->clocks_[static_cast<std::size_t>(rank_)];
  clock = std::max(clock, r.arrival);
  const auto at = reinterpret_cast<std::uintptr_t>(r.recv_data.data());
  const auto out = reinterpret_cast<std::uintptr_t>(output_.data());
  const bool into_output = !r.recv_data.empty() && at >= out && at < out + output_.size();
  if (reduces(static_cast<CollectiveKind>(r.signature().kind)) && !into_output)
    clock += static_cast<double>(r.bytes()) * fabric_->scale_ *
             fabric_->state_->net.params().reduce_us_per_byte;
  r.completion().complete();
}

void SimTransport::check_failed() {
  const auto& st = *fabric_->state_;
  if (st.aborted.load()) throw IoError(st.abort_code, st.abort_message);
}

void SimTransport::fail(chorus_result_t code, const std::string& message, const Spared&) {
  fabric_->fail_all(code, message);
}

}  // namespace chorus::sim
