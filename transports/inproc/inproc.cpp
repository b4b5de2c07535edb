#include "transports/inproc/inproc.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "base/core/error.hpp"

namespace chorus {
namespace {

class InprocRequest : public Request {
 public:
  InprocRequest(int src, int dst, bool is_send, uint32_t tag, const CallSignature& sig,
                std::size_t bytes)
      : Request(is_send ? dst : src, is_send, tag, sig, bytes), src_(src), dst_(dst) {}
  int src() const { return src_; }
  int dst() const { return dst_; }
  std::span<const std::byte> send_data;
  std::span<std::byte> recv_data;

 private:
  int src_, dst_;
};
using InprocPtr = std::shared_ptr<InprocRequest>;

struct Channel {
  std::deque<InprocPtr> sends;  // posted by src, waiting for a receive
  std::deque<InprocPtr> recvs;  // posted by dst, waiting for a send
};

void fail_request(const InprocPtr& r, chorus_result_t code, const std::string& message) {
  r->completion().fail(io_error(code, message));
}

}  // namespace

struct InprocFabric::State {
  std::mutex mutex;  // guards everything below except busy
  std::map<std::tuple<int, int, uint32_t>, Channel> channels;  // (src, dst, tag)
  std::vector<bool> closed;
  bool aborted = false;
  chorus_result_t abort_code = CHORUS_ERR_ABORTED;
  std::string abort_message;
  // Copies in progress into or out of each rank's buffers (counted at match
  // time under the mutex, released after the copy without it).
  std::unique_ptr<std::atomic<int>[]> busy;

  explicit State(int size) : closed(static_cast<std::size_t>(size), false) {
    busy = std::make_unique<std::atomic<int>[]>(static_cast<std::size_t>(size));
    for (int i = 0; i < size; ++i) busy[i].store(0);
  }

  // Delivers a matched pair; called without the mutex.
  void deliver(const InprocPtr& send, const InprocPtr& recv) {
    const CallSignature& ss = send->signature();
    const CallSignature& rs = recv->signature();
    if (!(ss == rs)) {
      std::string message = fmt::format("rank {} called {} but rank {} called {}", send->src(),
                                        describe(ss), recv->dst(), describe(rs));
      fail_request(recv, CHORUS_ERR_MISMATCH, message);
      fail_request(send, CHORUS_ERR_MISMATCH, message);
    } else if (send->send_data.size() != recv->recv_data.size()) {
      std::string message =
          fmt::format("rank {} sent {} bytes but rank {} expected {} bytes for {}", send->src(),
                      send->send_data.size(), recv->dst(), recv->recv_data.size(), describe(rs));
      fail_request(recv, CHORUS_ERR_MISMATCH, message);
      fail_request(send, CHORUS_ERR_MISMATCH, message);
    } else {
      if (!send->send_data.empty())
        std::memcpy(recv->recv_data.data(), send->send_data.data(), send->send_data.size());
      recv->completion().complete();
      send->completion().complete();
    }
    busy[send->src()].fetch_sub(1, std::memory_order_release);
    busy[recv->dst()].fetch_sub(1, std::memory_order_release);
  }

  // With the mutex held: the error a new request fails with, if any.
  bool refuse(const InprocPtr& r, int self) {
    const int peer = r->peer();
    if (aborted) {
      fail_request(r, abort_code, abort_message);
    } else if (closed[static_cast<std::size_t>(self)]) {
      fail_request(r, CHORUS_ERR_INVALID_USAGE,
                   fmt::format("rank {}: inproc transport used after close ({} rank {})", self,
                               r->is_send() ? "send to" : "receive from", peer));
    } else if (closed[static_cast<std::size_t>(peer)]) {
      fail_request(r, CHORUS_ERR_PEER_FAILURE,
                   fmt::format("rank {}: peer rank {} has closed its connection ({} rank {})", self,
                               peer, r->is_send() ? "send to" : "receive from", peer));
    } else {
      return false;
    }
    return true;
  }
};

InprocFabric::InprocFabric(int size) : size_(size) {
  CHORUS_CHECK(size > 0, "inproc fabric of {} ranks", size);
  state_ = std::make_unique<State>(size);
}

InprocFabric::~InprocFabric() = default;

std::shared_ptr<InprocFabric> make_inproc_fabric(int size) {
  return std::make_shared<InprocFabric>(size);
}

void InprocFabric::fail_all(chorus_result_t code, const std::string& message) {
  std::lock_guard lock(state_->mutex);
  if (state_->aborted) return;
  state_->aborted = true;
  state_->abort_code = code;
  state_->abort_message = message;
  // One exception object per request: requests are waited on by different threads.
  for (auto& [key, channel] : state_->channels) {
    for (auto& r : channel.sends) fail_request(r, code, state_->abort_message);
    for (auto& r : channel.recvs) fail_request(r, code, state_->abort_message);
    channel.sends.clear();
    channel.recvs.clear();
  }
}

bool InprocFabric::aborted() const {
  std::lock_guard lock(state_->mutex);
  return state_->aborted;
}

InprocTransport::InprocTransport(std::shared_ptr<InprocFabric> fabric, int rank)
    : fabric_(std::move(fabric)), rank_(rank) {
  CHORUS_CHECK(fabric_ && rank >= 0 && rank < fabric_->size(), "inproc rank {} of {}", rank,
               fabric_ ? fabric_->size() : 0);
}

InprocTransport::~InprocTransport() {
  close();
}

RequestPtr InprocTransport::isend(int peer, uint32_t tag, const CallSignature& sig,
                                  std::span<const std::byte> data) {
  CHORUS_CHECK(can_connect(peer), "rank {}: send to rank {} of {}", rank_, peer, size());
  auto req = std::make_shared<InprocRequest>(rank_, peer, true, tag, sig, data.size());
  req->send_data = data;
  auto& st = *fabric_->state_;
  InprocPtr match;
  {
    std::lock_guard lock(st.mutex);
    if (st.refuse(req, rank_)) return req;
    Channel& ch = st.channels[{rank_, peer, tag}];
    if (ch.recvs.empty()) {
      ch.sends.push_back(req);
      return req;
    }
    match = std::move(ch.recvs.front());
    ch.recvs.pop_front();
    st.busy[rank_].fetch_add(1, std::memory_order_relaxed);
    st.busy[peer].fetch_add(1, std::memory_order_relaxed);
  }
  st.deliver(req, match);
  return req;
}

RequestPtr InprocTransport::irecv(int peer, uint32_t tag, const CallSignature& sig,
                                  std::span<std::byte> data) {
  CHORUS_CHECK(can_connect(peer), "rank {}: receive from rank {} of {}", rank_, peer, size());
  auto req = std::make_shared<InprocRequest>(peer, rank_, false, tag, sig, data.size());
  req->recv_data = data;
  auto& st = *fabric_->state_;
  InprocPtr match;
  {
    std::lock_guard lock(st.mutex);
    if (st.refuse(req, rank_)) return req;
    Channel& ch = st.channels[{peer, rank_, tag}];
    if (ch.sends.empty()) {
      ch.recvs.push_back(req);
      return req;
    }
    match = std::move(ch.sends.front());
    ch.sends.pop_front();
    st.busy[rank_].fetch_add(1, std::memory_order_relaxed);
    st.busy[peer].fetch_add(1, std::memory_order_relaxed);
  }
  st.deliver(match, req);
  return req;
}

void InprocTransport::close() {
  auto& st = *fabric_->state_;
  {
    std::lock_guard lock(st.mutex);
    if (st.closed[static_cast<std::size_t>(rank_)]) return;
    st.closed[static_cast<std::size_t>(rank_)] = true;
    const std::string own =
        fmt::format("rank {}: inproc transport closed with this request pending", rank_);
    const std::string peer = fmt::format("peer rank {} has closed its connection", rank_);
    for (auto& [key, ch] : st.channels) {
      const auto& [src, dst, tag] = key;
      if (src == rank_) {  // our sends, and others' receives from us
        for (auto& r : ch.sends) fail_request(r, CHORUS_ERR_INVALID_USAGE, own);
        for (auto& r : ch.recvs)
          fail_request(r, CHORUS_ERR_PEER_FAILURE, fmt::format("rank {}: {}", dst, peer));
        ch.sends.clear();
        ch.recvs.clear();
      } else if (dst == rank_) {  // our receives, and others' sends to us
        for (auto& r : ch.recvs) fail_request(r, CHORUS_ERR_INVALID_USAGE, own);
        for (auto& r : ch.sends)
          fail_request(r, CHORUS_ERR_PEER_FAILURE, fmt::format("rank {}: {}", src, peer));
        ch.sends.clear();
        ch.recvs.clear();
      }
    }
  }
  // Copies matched before the close may still touch our buffers.
  while (st.busy[rank_].load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

void InprocTransport::check_failed() {
  std::string message;
  chorus_result_t code;
  {
    std::lock_guard lock(fabric_->state_->mutex);
    if (!fabric_->state_->aborted) return;
    message = fabric_->state_->abort_message;
    code = fabric_->state_->abort_code;
  }
  throw IoError(code, message);
}

void InprocTransport::fail(chorus_result_t code, const std::string& message, const Spared&) {
  fabric_->fail_all(code, message);
}

}  // namespace chorus
