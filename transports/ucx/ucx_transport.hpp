// UCX transport: one UCP context and worker per transport instance, an
// endpoint to every peer, tag matching for the data (ucx_wire.hpp has the tag
// layout and the headers).
//
// Set-up: every rank publishes its worker address in the store under
// key_prefix, creates endpoints to all peers and exchanges a hello (job token,
// pid, process start time, host boot id) with each; the constructor returns
// once every peer's hello arrived (bounded by connect_timeout_s).
//
// Data: a message smaller than zero_copy_min is one IOV send [LeadHeader |
// data] into a posted IOV receive [header slot | user buffer]. A larger one is
// a lead (the header) plus a contiguous bulk message straight from the user's
// buffer: the receiver checks the lead (signature, size) first and only then
// posts the bulk receive into the user's buffer, so UCX's rendezvous moves the
// bytes zero-copy, and a mismatched call never writes the buffer. (An IOV
// rendezvous is not zero-copy in UCX 1.13: over TCP it was 2-4x slower than a
// contiguous one here; lead + bulk matches contiguous.) Bulk receives of one
// (peer, tag) are posted in the order of their leads, so issue order holds for
// both kinds of message.
//
// Progress: all UCX calls happen under mu_. Waiters drive progress (poll()
// try-locks) and sleep on the worker's event fd themselves (ucp_worker_arm,
// then poll); a progress thread does the same while nobody waits and stands
// aside while a waiter spins. UCX callbacks only queue events; they are
// handled after the UCX call returns (no re-entrancy).
//
// Failure: UCX 1.13 selects no shared-memory transport for an endpoint with
// UCP_ERR_HANDLING_MODE_PEER (posix/sysv have "no peer failure handler"), and
// without it a SIGKILLed peer goes unnoticed. So: when shared memory is
// allowed and UCX_TLS includes it, endpoints use UCP_ERR_HANDLING_MODE_NONE
// and this transport watches the peers' processes itself (same host and pid
// namespace: /proc/<pid>/stat, every 500 ms); otherwise endpoints use
// UCP_ERR_HANDLING_MODE_PEER and UCX reports a dead peer. (Thread ranks of one
// process are not watched; fail_peer() is for what another channel sees.)
// Either way a peer's abort notice or a malformed message fails every request
// (IoError naming the peer) and the other peers are told. A dead peer does
// too, but first everything it sent that UCX already holds is taken in (the
// worker is progressed until idle), and its death spares the calls this rank
// is in or finished last (CallBoard::started): a receive those calls post
// from it still takes what arrived, and fails at once if nothing did; the
// call that fails so narrows what is spared here and at the peers. So a rank
// killed just after it finished a call does not fail that call at a peer
// still finishing it. (Over shared memory what it wrote stays readable; a
// rendezvous it did not finish fails.)
// fail_peer() fails only what involves one peer. Failed receives are
// cancelled inside UCX; a send cannot be in mode NONE (it only reads).
//
// Closing: a goodbye to every peer, then wait (close_timeout_s) for theirs;
// the destructor closes the endpoints (forced in mode PEER, else flushed).
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/bootstrap/store.hpp"
#include "include/chorus.h"
#include "transports/transport.hpp"
#include "transports/ucx/ucx_wire.hpp"

namespace spdlog {
class logger;
}

namespace chorus::ucx {

// The ucx subsystem's logger (one for the transport's files).
spdlog::logger& log();

struct UcxOptions {
  int rank = 0;
  int size = 1;
  std::string token;
  std::string key_prefix = "ucx/";  // store namespace of this transport instance
  double connect_timeout_s = 60;
  double close_timeout_s = 30;
  // False when peers are on different hosts: UCX's shared-memory transports
  // are then left out of UCX_TLS.
  bool allow_shared_memory = true;
  // Messages from this size go as lead + zero-copy bulk message.
  std::size_t zero_copy_min = 32 * 1024;
  // Under a control channel (RoutedTransport): a peer whose endpoint fails
  // is not taken for dead here but handed to the control channel, which
  // settles whether it is alive (Transport::take_lost_connections).
  bool control_settles_lost_peers = false;
};

class UcxTransport final : public Transport {
 public:
  UcxTransport(Store& store, UcxOptions options);
  ~UcxTransport() override;

  std::string_view name() const override { return "ucx"; }
  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  bool can_connect(int peer) const override { return peer >= 0 && peer < options_.size; }
  RequestPtr isend(int peer, uint32_t tag, const CallSignature& sig,
                   std::span<const std::byte> data) override;
  RequestPtr irecv(int peer, uint32_t tag, const CallSignature& sig,
                   std::span<std::byte> data) override;
  bool poll() override;
  void spin_begin() override;
  void spin_end() override;
  void wait_for_progress(Request& pending, std::chrono::nanoseconds timeout) override;
  void check_failed() override;
  void check_call(uint32_t tag, const CallSignature& sig) override;
  void check_peer(int peer, uint32_t tag, const CallSignature& sig) override;
  Spared spared() const override;
  std::vector<std::pair<int, std::string>> take_lost_connections() override;
  void close() override;
  void fail(chorus_result_t code, const std::string& message, const Spared& spared) override;
  // Without UCX's peer error handling (shared memory), from the first peer
  // failure: a peer killed between reserving a slot of this rank's
  // shared-memory receive queue and filling it stops the queue for every
  // sender, and the calls a death spares may wait on what is behind it.
  std::optional<Clock::time_point> arrivals_may_be_lost_since() const override;

  // Fails every pending and later request involving `peer` (receives are
  // cancelled inside UCX, the endpoint is closed), e.g. when another channel
  // saw it die. Returns once UCX holds none of those requests' buffers
  // (bounded: 2 s).
  void fail_peer(int peer, chorus_result_t code, const std::string& message);

  // UCX's description of the endpoint to `peer`: its lanes and the UCX
  // transports they use.
  std::string endpoint_info(int peer);
  // Whether a message from `peer` with `tag` has arrived that no posted
  // receive took (UCX holds it as unexpected): diagnostics, and tests that
  // must know a message arrived before its receive.
  bool has_unmatched_arrival(int peer, uint32_t tag);
  // UCX_TLS as this transport's context uses it.
  const std::string& transports() const { return tls_; }
  // Whether endpoints use UCP_ERR_HANDLING_MODE_PEER (else: process watch).
  bool peer_error_handling() const { return peer_mode_; }
  // As UCX reporting `status` on the endpoint to `peer` (its error callback):
  // for tests, which cannot make a live peer's connection fail on demand.
  void simulate_endpoint_error(int peer, ucs_status_t status);
  // As UCX ending the next send to `peer` that completes at once with
  // `status`, before any report on its endpoint (for tests, likewise).
  void simulate_send_error(int peer, ucs_status_t status);

 private:
  // A peer this rank has an endpoint to (the test hooks' argument).
  void check_endpoint_peer(int peer) const;
  enum class Part : uint8_t { lead, bulk, control, ep_error };
  // One send or receive in flight; owned by its Peer while UCX may touch it.
  struct Op : Request {
    Op(UcxTransport* t, int peer, bool is_send, uint32_t tag, const CallSignature& sig,
       std::byte* buffer, std::size_t bytes)
        : Request(peer, is_send, tag, sig, bytes), owner(t), data(buffer) {}
    UcxTransport* owner;
    std::byte* data;
    LeadHeader header{};  // sent, or where a receive's lead header lands
    ucp_dt_iov_t iov[2]{};
    void* lead = nullptr;  // UCX requests in flight
    void* bulk = nullptr;
    int sends_left = 0;      // sends: UCX sends not yet completed
    bool in_order = false;   // receives: queued in Peer::recv_order
    bool lead_done = false;  // receives: the lead arrived (or failed)
    ucs_status_t lead_status = UCS_OK;
    std::size_t lead_length = 0;
    bool drain = false;    // internal: swallows a bulk message nobody wants
    bool control = false;  // internal: a control message (bytes in `owned`)
    std::vector<char> owned;
    std::exception_ptr cancel_error;  // reported when UCX cancels the op
    // A request with a peer whose endpoint failed (Peer::broken) that UCX
    // ended, or a send that could not go: pending until the control
    // channel's verdict fails it (or spares its call).
    bool stranded = false;
  };
  using OpPtr = std::shared_ptr<Op>;
  struct Event {
    Op* op;
    Part part;
    void* request;
    ucs_status_t status;
    std::size_t length;
    uint64_t sender_tag;
    int peer;
  };
  struct Peer {
    UcxTransport* self = nullptr;  // the endpoint error callback's argument
    int rank = 0;
    ucp_ep_h ep = nullptr;
    bool hello = false, said_goodbye = false, gone = false;
    std::exception_ptr failure;  // fail_peer: every request with this peer fails
    std::exception_ptr lost;     // it died: what its requests fail with (gone is set too)
    // Its endpoint failed, why (control_settles_lost_peers): dead, or alive
    // behind a dropped connection? The control channel settles that; until
    // then its requests stay pending and it is not gone.
    std::string broken;
    OpPtr goodbye;          // our goodbye to it
    int64_t watch_pid = 0;  // its process, when we can watch it (else 0)
    uint64_t watch_start = 0;
    std::unordered_map<Op*, OpPtr> ops;
    std::map<uint32_t, std::deque<Op*>> recv_order;  // receives by tag, lead not yet handled
  };

  // ucx_setup.cpp
  void init_context();
  void init_worker();
  void connect(Store& store);
  void teardown() noexcept;
  void on_hello(int peer, const ControlHeader& h);
  void watch_peers_locked();
  void progress_loop();
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  // A status with which UCX ends a request because the endpoint to its peer
  // failed (timed out, reset, unreachable), not because of the request.
  static bool ends_with_endpoint(ucs_status_t s) {
    return s != UCS_OK && s != UCS_ERR_CANCELED && s != UCS_ERR_MESSAGE_TRUNCATED;
  }
  // ucx_transport.cpp, ucx_control.cpp (the *_locked ones and callbacks: mu_ held)
  static void on_send_lead(void* request, ucs_status_t status, void* user_data);
  static void on_send_bulk(void* request, ucs_status_t status, void* user_data);
  static void on_recv_lead(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                           void* user_data);
  static void on_recv_bulk(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                           void* user_data);
  static void on_recv_control(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                              void* user_data);
  void track_send(const OpPtr& op, ucs_status_ptr_t request, Part part);
  void post_control_recv_locked();
  void post_bulk_recv_locked(Op* op);
  void post_drain_locked(int peer, uint32_t tag);
  OpPtr send_control_locked(int peer, ControlType type, int32_t code = 0,
                            const std::string& reason = "");
  bool progress_locked();
  void process_events_locked();
  void handle_event(const Event& e);
  void handle_control(int peer, const ControlMessage& msg, std::size_t length);
  void advance_order_locked(int peer, uint32_t tag);
  void finish_lead_locked(Op* op);
  void complete_op(Op* op);
  void fail_op(Op* op, std::exception_ptr error);
  void release_op(Op* op);
  void adopt(const OpPtr& op);
  void close_ep_locked(int peer, bool force);
  void peer_failed_locked(int peer, const std::string& why, bool died = false);
  // A peer's process ended (watch) or UCX reports its endpoint failed: queued
  // in deaths_, settled by process_events_locked (peer_failed_locked, died)
  // once no event is pending.
  void peer_died_locked(int peer, std::string why);
  // The endpoint to `peer` failed, its process not known dead: with a
  // control channel, closes the endpoint and hands the peer over
  // (take_lost_connections); else a death (peer_died_locked).
  void lose_connection_locked(int peer, const std::string& why);
  // Whether the control channel settles a failed endpoint to `p` (else it is
  // a death, or no question: the peer left, failed, or this rank closes).
  bool control_settles_locked(const Peer& p) const {
    return options_.control_settles_lost_peers && !closing_ && !p.gone && !p.failure &&
           !p.said_goodbye;
  }
  // Whether a request with `p` that UCX ended in error waits for the control
  // channel's verdict (stranded) instead of failing here: its endpoint
  // failed, and nothing has settled its fate yet.
  bool awaits_verdict_locked(const Peer& p) const {
    return !p.broken.empty() && !failure_.error && !p.failure && !p.gone;
  }
  // What a request to or from a peer that is gone fails with.
  std::exception_ptr gone_error(int peer) const;
  void fail_all_locked();
  // The failure of the transport, or of the peer, that a new request of this
  // call meets (null: none).
  std::exception_ptr refusal_locked(const Peer& p, uint32_t tag, const CallSignature& sig) const {
    if (failure_.refuses(tag, sig)) return failure_.error;
    return p.failure;
  }
  void fail_and_notify_locked(chorus_result_t code, const std::string& message,
                              const std::string& local_message, const Spared& spared);
  void flush_notices_locked();
  bool recvs_in_ucx(int peer, bool given_up_only = false) const;
  void drain_unexpected_locked();
  std::exception_ptr mismatch_error(int peer, const CallSignature& theirs, std::size_t their_bytes,
                                    const CallSignature& mine, std::size_t my_bytes) const;
  std::exception_ptr left_error(int peer) const;
  enum class Arm { armed, busy, unsupported };
  Arm arm_locked();
  void sleep_locked(std::unique_lock<std::mutex>& lock, Arm arm, int timeout_ms);
  // Drives progress until pred() holds or the deadline passes (sleeping on the
  // event fd with the lock released); returns pred().
  bool drive_until(std::unique_lock<std::mutex>& lock, const std::function<bool()>& pred,
                   const Deadline& deadline);

  std::vector<std::pair<int, std::string>> lost_connections_;  // for take_lost_connections
  std::atomic<bool> lost_pending_{false};  // lost_connections_ is not empty (read without mu_)
  UcxOptions options_;
  uint64_t job_ = 0;
  std::string tls_;
  bool peer_mode_ = true;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_address_t* address_ = nullptr;
  std::size_t address_length_ = 0;
  int efd_ = -1;          // the worker's event fd
  int wake_fd_ = -1;      // eventfd: wakes waiters sleeping on efd_ when another thread completed
  int stop_fd_ = -1;      // eventfd: stops the progress thread
  int64_t self_pid_ = 0;  // what the hello tells peers about this process
  uint64_t self_start_ = 0;
  std::string boot_id_;

  mutable std::mutex mu_;  // guards everything below and every UCX call after set-up
  std::vector<Peer> peers_;
  std::vector<Event> events_;
  std::mutex ep_errors_mu_;  // endpoint errors, in case UCX reports one from its own thread
  std::vector<std::pair<int, ucs_status_t>> ep_errors_;
  std::optional<std::pair<int, ucs_status_t>> send_error_for_test_;  // mu_
  std::vector<void*> closing_eps_;  // ucp_ep_close_nbx requests in flight
  std::vector<OpPtr> notices_;      // abort notices still going out
  ControlMessage control_msg_{};    // where the posted control receive lands
  void* control_req_ = nullptr;
  std::vector<std::pair<int, std::string>> deaths_;  // peer_died_locked: not settled yet
  FailureRecord failure_;  // the first failure, as peers are told it, and what it spares
  // arrivals_may_be_lost_since, as Clock ticks (0: not so); read without mu_.
  std::atomic<Clock::rep> arrivals_lost_since_{0};
  std::atomic<bool> failed_{false};
  bool closing_ = false, tearing_down_ = false, flushing_ = false, notices_pending_ = false;
  bool wake_pending_ = false;
  bool watching_ = false;
  Clock::time_point next_watch_{};
  std::size_t live_ops_ = 0;

  std::atomic<uint32_t> spinners_{0};  // waiters polling; the progress thread stands aside
  std::atomic<uint32_t> sleepers_{0};  // waiters asleep on efd_
  std::atomic<bool> stop_{false};
  std::thread progress_;
};

}  // namespace chorus::ucx
