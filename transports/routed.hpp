// Point-to-point traffic routed per peer over several transports (routes.hpp
// says which). The first transport is the control channel (TCP): connected to
// every peer, it learns first when a peer dies or a rank aborts, and such a
// failure is then a failure of every transport here, so that a wait on a
// data transport (UCX) that would not notice a dead peer ends as well.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "transports/transport.hpp"

namespace chorus {

class RoutedTransport final : public Transport {
 public:
  // route[peer] indexes transports; transports[0] is the control channel.
  RoutedTransport(std::vector<std::unique_ptr<Transport>> transports, std::vector<int> route);
  ~RoutedTransport() override;

  std::string_view name() const override { return name_; }
  int rank() const override { return control().rank(); }
  int size() const override { return control().size(); }
  bool can_connect(int peer) const override;
  RequestPtr isend(int peer, uint32_t tag, const CallSignature& sig,
                   std::span<const std::byte> data) override;
  RequestPtr irecv(int peer, uint32_t tag, const CallSignature& sig,
                   std::span<std::byte> data) override;
  bool gathers_sends(int peer) const override { return route(peer).gathers_sends(peer); }
  RequestPtr isend_gather(int peer, uint32_t tag, const CallSignature& sig,
                          std::span<const std::span<const std::byte>> pieces) override {
    return route(peer).isend_gather(peer, tag, sig, pieces);
  }
  bool scatters_recvs(int peer) const override { return route(peer).scatters_recvs(peer); }
  RequestPtr irecv_scatter(int peer, uint32_t tag, const CallSignature& sig,
                           std::span<const std::span<std::byte>> pieces) override {
    return route(peer).irecv_scatter(peer, tag, sig, pieces);
  }
  bool poll() override;
  void spin_begin() override;
  void spin_end() override;
  void wait_for_progress(Request& pending, std::chrono::nanoseconds timeout) override;
  void check_failed() override;
  // The control channel's: it carries the asks and the failure notices.
  void drain_input() override { control().drain_input(); }
  void check_call(uint32_t tag, const CallSignature& sig) override;
  void check_peer(int peer, uint32_t tag, const CallSignature& sig) override;
  Spared spared() const override { return control().spared(); }
  // On the control channel, connected to every peer.
  void announce(int peer, uint32_t tag, const CallSignature& sig) override {
    control().announce(peer, tag, sig);
  }
  void check_announced(uint32_t tag, const CallSignature& sig) override {
    control().check_announced(tag, sig);
  }
  bool reports_progress() const override { return control().reports_progress(); }
  int recover_result(uint32_t tag, const CallSignature& sig, std::span<const int> peers,
                     std::span<std::byte> result,
                     chorus_result_t code = CHORUS_ERR_PEER_FAILURE) override {
    return control().recover_result(tag, sig, peers, result, code);
  }
  bool parts_done(uint32_t tag, const CallSignature& sig, std::span<const int> peers,
                  chorus_result_t code = CHORUS_ERR_TIMEOUT) override {
    return control().parts_done(tag, sig, peers, code);
  }
  void close() override;
  void fail(chorus_result_t code, const std::string& message, const Spared& spared) override;
  std::optional<Clock::time_point> arrivals_may_be_lost_since() const override;

  // How long a wait on a data transport that may have lost arrivals goes on
  // before it asks the peer (from the loss), and how long after the peer
  // answered that its part is done (what it sent should be here).
  static constexpr auto kLostArrivalAsk = std::chrono::milliseconds(100);
  static constexpr auto kLostArrivalWait = std::chrono::milliseconds(500);

 private:
  Transport& control() const { return *transports_.front(); }
  Transport& route(int peer) const;
  // A failure the control channel learnt of fails the data transports too,
  // with the same spared calls (their peers learn it from the control channel).
  // First, a data transport's lost connections go to the control channel,
  // which settles them. Locks: each transport's own, one at a time.
  void pass_on_control_failure();
  // A wait on `data`, which may have lost what the peer sent: asks the peer
  // whether its part is done, and throws when it is not (it is sealed, and
  // fails the call too) or when it is but its messages still have not come.
  void check_lost_arrival(const Transport& data, const Request& pending);

  struct AskedPeer {  // a peer that answered that its part of a call is done
    int peer;
    uint32_t tag;
    uint64_t seq;
    Clock::time_point answered;
  };

  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<int> route_;
  std::string name_;
  std::mutex asked_mu_;  // guards asked_ (waits of several threads); no other lock inside
  std::vector<AskedPeer> asked_;
};

}  // namespace chorus
