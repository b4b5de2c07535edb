// TCP transport: one connection per peer pair, non-blocking sockets driven by
// epoll in a progress thread (and by waiters that poll while they spin).
//
// Set-up: every rank listens on an ephemeral port and publishes host:port in
// the store; rank i connects to every rank j < i and accepts from every j > i.
// Each connection starts with a validated Hello (job token, both ranks). The
// listener stays open: later or foreign connections are handshaken, refused
// and logged without disturbing the job.
//
// Data: frames (wire.hpp). A send is written from the user's buffer (sendmsg
// of header + data, or + a gather send's pieces); a receive that is already
// posted when its frame arrives is read straight into the user's buffer (or
// a scatter receive's pieces) once the payload reaches
// CHORUS_TCP_ZERO_COPY_MIN; smaller frames come through a staging buffer.
// Frames that arrive before their receive is posted are kept as unexpected.
//
// A peer whose stream ends without a goodbye is probed before it is taken
// for dead (tcp_probe.cpp): a fresh connection to its listener that a live
// peer answers. Dead, its death spares the calls in progress; alive (the
// network dropped the connection), both ends fail, sparing the calls whose
// part both had done, which they tell each other on the probe's connection.
//
// Locking: one mutex (mu_) guards all peer state and all socket I/O after
// set-up. The progress thread takes it after epoll_wait returns; poll() only
// try-locks it, so a spinning waiter never blocks on the progress thread.
#pragma once

#include <sys/epoll.h>
#include <sys/types.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/bootstrap/store.hpp"
#include "base/core/config.hpp"
#include "include/chorus.h"
#include "transports/tcp/socket.hpp"
#include "transports/tcp/wire.hpp"
#include "transports/transport.hpp"

namespace spdlog {
class logger;
}

namespace chorus::tcp {

// The tcp subsystem's logger (one for the transport's files).
spdlog::logger& log();

// The most iovec entries one sendmsg or recvmsg is given.
inline constexpr int kMaxIov = 128;

struct TcpOptions {
  int rank = 0;
  int size = 1;
  std::string token;
  std::string bind_host = "127.0.0.1";
  std::string key_prefix = "tcp/";  // store namespace of this transport instance
  std::size_t socket_buffer = 4 << 20;
  std::size_t zero_copy_min = 4096;
  std::size_t hold_back_min = 64 * 1024;  // unexpected frames from this size wait in the socket
  double connect_timeout_s = 60;
  double close_timeout_s = 30;
  // A peer that dies or reports a failure of its own fails only the requests
  // to and from it, then and later; the transport and the other peers go on.
  // For strategies whose ranks may fail alone (a parameter server outlives
  // its workers). Communicators leave it off: every rank of a communicator
  // must get the same verdict.
  bool isolate_peer_failures = false;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(Store& store, TcpOptions options);
  ~TcpTransport() override;

  std::string_view name() const override { return "tcp"; }
  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  bool can_connect(int peer) const override { return peer >= 0 && peer < options_.size; }
  RequestPtr isend(int peer, uint32_t tag, const CallSignature& sig,
                   std::span<const std::byte> data) override;
  RequestPtr irecv(int peer, uint32_t tag, const CallSignature& sig,
                   std::span<std::byte> data) override;
  // sendmsg takes the pieces as they lie, with the frame's header.
  bool gathers_sends(int) const override { return true; }
  RequestPtr isend_gather(int peer, uint32_t tag, const CallSignature& sig,
                          std::span<const std::span<const std::byte>> pieces) override;
  // recvmsg fills the pieces as they lie, from the socket or the staging buffer.
  bool scatters_recvs(int) const override { return true; }
  RequestPtr irecv_scatter(int peer, uint32_t tag, const CallSignature& sig,
                           std::span<const std::span<std::byte>> pieces) override;
  bool poll() override;
  void drain_input() override;
  void spin_begin() override;
  void spin_end() override;
  void wait_for_progress(Request& pending, std::chrono::nanoseconds timeout) override;
  void check_failed() override;
  void check_call(uint32_t tag, const CallSignature& sig) override;
  void check_peer(int peer, uint32_t tag, const CallSignature& sig) override;
  Spared spared() const override;
  void announce(int peer, uint32_t tag, const CallSignature& sig) override;
  void check_announced(uint32_t tag, const CallSignature& sig) override;
  bool reports_progress() const override { return true; }  // status frames
  void close() override;
  void fail(chorus_result_t code, const std::string& message, const Spared& spared) override;
  // tcp_probe.cpp: drops the stream to `peer` as the network dropped the
  // other channel, and settles it as a lost stream (probe).
  void lose_connection(int peer, const std::string& why) override;
  // tcp_recover.cpp: ask frames to the live peers, and their answers.
  int recover_result(uint32_t tag, const CallSignature& sig, std::span<const int> peers,
                     std::span<std::byte> result,
                     chorus_result_t code = CHORUS_ERR_PEER_FAILURE) override;
  bool parts_done(uint32_t tag, const CallSignature& sig, std::span<const int> peers,
                  chorus_result_t code = CHORUS_ERR_TIMEOUT) override;

  // The port this rank listens on (tests use it to connect as a stranger).
  uint16_t listen_port() const { return listen_port_; }
  // Whether a frame from `peer` with `tag` has arrived that no posted receive
  // took: kept as unexpected, or parked in the socket (diagnostics, and tests
  // that must know a message arrived before its receive).
  bool has_unmatched_arrival(int peer, uint32_t tag);

 private:
  struct SendOp {
    FrameHeader header;
    std::span<const std::byte> data;
    // A gather send's payload, in place of data.
    std::vector<std::span<const std::byte>> pieces;
    std::vector<std::byte> owned;  // payload owned by the op (abort reasons), in place of both
    std::size_t sent = 0;          // bytes of header + payload written so far
    RequestPtr request;            // null for internal frames
    std::size_t payload_bytes() const;
    // fn(span) for each span of the payload, in order.
    template <typename Fn>
    void for_each_payload(Fn&& fn) const {
      if (!owned.empty()) return fn(std::span<const std::byte>(owned));
      if (pieces.empty()) return fn(data);
      for (const auto& piece : pieces) fn(piece);
    }
  };
  // isend and isend_gather: `op` with its payload set.
  RequestPtr send_data(int peer, uint32_t tag, const CallSignature& sig, SendOp op);
  // Where a receive's payload goes: one buffer, or (a scatter receive)
  // pieces in order, none of them empty.
  struct RecvTarget {
    std::span<std::byte> buffer;
    std::vector<std::span<std::byte>> pieces;  // in place of buffer when not empty
    std::size_t bytes = 0;                     // the payload's length: theirs together
    // bytes from src into the target.
    void fill(const std::byte* src) const;
  };
  // irecv and irecv_scatter.
  RequestPtr recv_data(int peer, uint32_t tag, const CallSignature& sig, RecvTarget target);
  struct PostedRecv {
    RequestPtr request;
    RecvTarget target;
  };
  struct Unexpected {
    FrameHeader header;
    std::vector<std::byte> payload;
  };
  struct RxState {
    std::vector<std::byte> stage;  // staging buffer for headers and small payloads
    std::size_t stage_begin = 0, stage_end = 0;
    bool in_payload = false;
    FrameHeader header{};
    std::byte* dst = nullptr;  // null: discard the payload
    // A scatter receive's pieces (dst: the first one's data), filled in order;
    // the next byte goes to pieces[piece] at piece_at. Empty for any other frame.
    std::vector<std::span<std::byte>> pieces;
    std::size_t piece = 0, piece_at = 0;
    std::size_t length = 0, received = 0;
    RequestPtr request;  // the posted receive being filled, if any
    bool keep = false;   // payload goes to `holding` (unexpected / abort reason)
    // A large frame arrived before its receive: the socket is not read until
    // the receive is posted (TCP flow control holds the sender back), so large
    // payloads never land in freshly allocated memory and are never copied twice.
    bool awaiting_recv = false;
    Clock::time_point parked_since;  // when awaiting_recv was set
    std::vector<std::byte> holding;  // unexpected payload or abort reason

    // The payload goes to `target` (a posted receive's).
    void aim(RecvTarget target);
    // n bytes of the payload arrived from src: into place (none when dst is null).
    void store(const std::byte* src, std::size_t n);
    // Reads up to `left` bytes of the payload from the socket straight into
    // place (dst set): recv's result; `asked`: how many it asked for (fewer
    // than left where the pieces take more iovecs than one call is given).
    ssize_t read_direct(int fd, std::size_t left, std::size_t& asked);
  };
  // Asking a peer whose stream ended whether it is alive (tcp_probe.cpp).
  struct Probe {
    Fd fd;
    bool sent = false;           // the probe is written; its answer is awaited
    std::vector<std::byte> in;   // the answer so far: HelloAck, then a notice frame
    Clock::time_point deadline;  // no answer by then: dead
    std::string why;             // why its stream ended
    Spared started;              // what its death spares: the calls in progress then
  };
  // A call this rank asked a peer about (tcp_recover.cpp).
  struct Asked {
    uint32_t tag = 0;
    CallSignature sig;
    bool answered = false;
    bool finished = false;
    bool part_done = false;         // a round's ask (kAskPartDone): its part is done
    std::vector<std::byte> result;  // its kept result, when finished
  };
  struct Peer {
    Fd fd;
    std::string address;        // its listener (host:port), for a probe
    bool said_goodbye = false;  // peer announced a clean close
    bool gone = false;          // socket finished (EOF or error)
    // A send failed (the peer reset the connection): why. Nothing more is
    // written; what the peer sent before it went (its goodbye, its failure
    // notice) is read first, and the loss settled after (process_events).
    std::string send_failed;
    uint32_t events = EPOLLIN | EPOLLRDHUP;  // what epoll watches for this socket now
    std::deque<SendOp> sendq;
    RxState rx;
    std::map<uint32_t, std::deque<PostedRecv>> posted;
    std::map<uint32_t, std::deque<Unexpected>> unexpected;
    std::exception_ptr failure;            // isolate_peer_failures: why it failed
    std::exception_ptr lost;               // why its stream ended without a goodbye
    bool lost_alive = false;               // it did, with the peer alive (settle_alive)
    std::optional<FrameHeader> announced;  // the call it last said it waits in
    Clock::time_point status_sent;         // when this rank last told it where it is
    std::optional<Probe> probe;            // gone, but not known yet whether dead
    std::optional<Spared> vouched;         // what this rank told it in a probe (CallBoard::vouch)
    std::optional<Asked> asked;            // recover_result: the call asked about, its answer
    // Results of calls it finished that it sent unasked: as it left
    // (CallBoard::parting), or an answer that came after the asker gave up.
    std::deque<CallBoard::KeptResult> finished_results;
  };
  struct Stranger {  // an accepted connection whose Hello is still being read
    Fd fd;
    std::string address;
    Hello hello{};
    std::size_t received = 0;
    std::vector<std::byte> notice;  // a probe's notice frame, or an ask's frame, after the Hello
    Clock::time_point deadline;
  };

  // tcp_setup.cpp
  void establish(Store& store);
  void accept_strangers();
  void service_stranger(std::size_t index, bool setup_phase);
  void expire_strangers();
  void register_peer_fd(int peer);

  // tcp_transport.cpp (all with mu_ held)
  void process_events(const epoll_event* events, int count);
  void pump_rx(int peer);
  void on_header(int peer);
  void finish_payload(int peer);
  void flush(int peer);
  void update_interest(int peer);
  void peer_lost(int peer, const std::string& why);

  // tcp_probe.cpp (all with mu_ held)
  // Starts asking `peer` whether it is alive (its stream ended for `why`;
  // its death would spare `started`); false when it cannot be asked.
  bool start_probe(int peer, const std::string& why, const Spared& started);
  void service_probe(int peer, uint32_t events);
  void expire_probes();
  void end_probe(Peer& p);
  // Its stream ended and it is dead (or could not be asked): its death
  // spares the calls in progress when the stream ended.
  void settle_dead(int peer, const std::string& why, const Spared& started);
  // Its stream ended but it is alive: a failure here that spares the calls
  // this rank finished and those both vouched for (`theirs`: the peer's).
  void settle_alive(int peer, const std::string& why, const Spared& theirs);
  // A stranger's hello is a probe: answers it with what this rank vouches
  // for; false (and *refusal) when it cannot.
  bool answer_probe(Stranger& s, std::string* refusal);
  // Then reads what the prober vouches for and settles. Returns whether the
  // stranger is done (settled, or *refusal); false: more to read.
  bool finish_probe(Stranger& s, std::string* refusal);
  // "peer failure: rank P failed: its connection to rank R ended without a
  // goodbye (why)".
  std::string lost_message(int peer, const std::string& why) const;
  // What this rank vouches for to `peer` (CallBoard::vouch, sealing), the
  // same every time it is asked.
  const Spared& vouch_to(int peer);
  // tcp_recover.cpp (with mu_ held): a peer asks whether this rank finished
  // a call (answered from the board, sealing it); a peer's answer is filed.
  void answer_ask_locked(int peer, const FrameHeader& ask);
  void take_answer_locked(int peer);
  // The answer to `peer`'s ask (sealing the slot where it says no), on
  // either path.
  SendOp answer_locked(int peer, const FrameHeader& ask);
  // Sends an ask about `sig` (`flags`, the asker's `code`) to each of `peers`
  // that its stream reaches; returns how many.
  int send_asks_locked(uint32_t tag, const CallSignature& sig, std::span<const int> peers,
                       uint8_t flags, chorus_result_t code);
  // Files the answers to the asks sent, calling on_answer(peer, answer) for
  // each as it comes, until on_answer returns true (then: stopped), every
  // asked peer answered (answered), or one cannot (lost, or not by
  // `deadline`: incomplete). No lock held.
  enum class Asking { stopped, answered, incomplete };
  template <typename OnAnswer>
  Asking collect_answers(const CallSignature& sig, Clock::time_point deadline,
                         OnAnswer&& on_answer);
  // A stranger's hello is an ask (a live peer whose stream was lost): reads
  // its ASK frame and answers it on that connection. Returns whether the
  // stranger is done (answered, or *refusal); false: more to read.
  bool finish_ask(Stranger& s, std::string* refusal);
  // Asks `peer` through its listener at `address` (no lock held); true with
  // its kept result in *result when it finished the call.
  bool ask_through_listener(int peer, const std::string& address, uint32_t tag,
                            const CallSignature& sig, chorus_result_t code,
                            const Deadline& deadline, std::vector<std::byte>* result);
  // A receive completed from the front of peer's unexpected frames of its tag.
  RequestPtr irecv_unexpected_locked(int peer, const RequestPtr& request, const RecvTarget& target);
  // The frame parked in the socket is read into `holding` (kept as unexpected).
  void set_aside_parked(int peer);
  static bool has_posted_locked(const Peer& p);
  // The transport has failed and the failure does not spare this call.
  bool refused_locked(uint32_t tag, const CallSignature& sig) const {
    return failure_.refuses(tag, sig);
  }
  void fail_all_locked();
  // isolate_peer_failures: fails what involves `peer` (now and later) only.
  void fail_peer_locked(int peer, std::exception_ptr error);
  // Fails the receives posted from `p` (and the one it is filling) and the
  // sends queued to it; peer_lost and fail_peer_locked share it.
  void fail_requests_with_locked(Peer& p, std::exception_ptr error);
  // Fails the sends queued to p that `spares` does not keep.
  void drop_sends_locked(Peer& p, const std::exception_ptr& error,
                         const std::function<bool(const RequestPtr&)>& spares);
  void fail_and_notify_locked(chorus_result_t code, const std::string& message,
                              const std::string& local_message, const Spared& spared);
  void enqueue_locked(int peer, SendOp op);
  std::exception_ptr mismatch_error(int peer, const CallSignature& theirs, std::size_t their_bytes,
                                    const CallSignature& mine, std::size_t my_bytes) const;
  bool io_in_flight_locked() const;
  // A status frame (where this rank is in tag's space: CallBoard) to peer.
  void send_status_locked(int peer, uint32_t tag);
  // A frame parked in the socket for long holds back everything its sender
  // sends after it, announcements included: that sender waits on this rank
  // and cannot ask where it is, so it is told unasked (every kAnnounceAfter).
  void report_parked_locked();
  void progress_loop();
  // Makes whoever sleeps in epoll_wait on epoll_fd_ return (wake_fd_).
  void wake_epoll();
  void hand_over_results_locked();  // close(): mu_ held

  TcpOptions options_;
  uint16_t listen_port_ = 0;
  Fd listen_fd_;
  Fd epoll_fd_;
  Fd wake_fd_;  // eventfd: stops the progress thread

  mutable std::mutex mu_;  // guards everything below
  std::vector<Peer> peers_;
  std::vector<Stranger> strangers_;
  FailureRecord failure_;  // the first failure, as peers are told it, and what it spares
  std::atomic<bool> has_failure_{false};  // failure_ is set (read without mu_)
  std::atomic<int> departed_{0};          // peers that said goodbye or are gone (no mu_)
  std::atomic<int> probes_{0};            // probes under way (no mu_: waiters check it)
  bool closing_ = false;
  Clock::time_point next_parked_check_;

  std::atomic<uint32_t> spinners_{0};  // waiters polling; the progress thread stands aside
  std::atomic<bool> stop_{false};
  std::thread progress_;
};

}  // namespace chorus::tcp
