// The simulated transport of chorus-sim: thread ranks in one process (as
// transports/inproc), each with a virtual clock (net_clock.hpp), so that the
// real algorithm code can be timed on worlds of many hosts.
//
// Semantics, where they differ from inproc:
//  - Eager sends: isend copies the payload (or delivers it into a posted
//    receive) and completes at once; the sender's clock does not move. The
//    message's arrival time is fixed then, from the sender's clock
//    (NetClock::send).
//  - A receive completes only when its own rank waits for it
//    (wait_for_progress, reached from wait_all with Spin{0}); the rank's clock
//    then becomes max(clock, arrival), plus gamma * bytes when the bytes are
//    to be reduced. The transport cannot see the reduction, so the rule is:
//    a receive of a reducing collective (allreduce, reduce, reduce_scatter(v))
//    is charged unless it lands in the call's output buffer (set_output). The
//    algorithms receive operands into scratch and reduce them from there,
//    while the pure copies (the allgather half of a ring, the last stage of
//    hierarchical, recursive doubling's unfold) land in the output. poll()
//    does nothing, so a clock only moves through waits and never depends on
//    thread timing.
//  - Payload scale: every message stands for `scale` times its bytes
//    (set_scale). chorus-sim runs a call of B bytes on buffers of B / scale,
//    so that 1024 ranks x 256 MiB need neither the memory nor the reduction
//    time; the data are real (and reduced for real) at the smaller size.
//  - fail() fails the whole fabric, as inproc.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tools/sim/net_clock.hpp"
#include "transports/transport.hpp"

namespace chorus::sim {

class SimFabric {
 public:
  SimFabric(NetParams params, std::vector<int> host_of_rank);
  ~SimFabric();
  SimFabric(const SimFabric&) = delete;
  SimFabric& operator=(const SimFabric&) = delete;

  int size() const { return size_; }
  // Between calls only (no rank inside one): clocks to 0, links idle, and
  // the payload scale of the next call.
  void reset(double scale);
  double clock(int rank) const { return clocks_[static_cast<std::size_t>(rank)]; }
  // The latest clock of any rank: when the last rank finished.
  double makespan() const;
  void fail_all(chorus_result_t code, const std::string& message);

 private:
  friend class SimTransport;
  struct State;
  int size_;
  std::vector<double> clocks_;  // each written by its own rank only
  double scale_ = 1;
  std::unique_ptr<State> state_;
};

class SimTransport : public Transport {
 public:
  SimTransport(std::shared_ptr<SimFabric> fabric, int rank);
  ~SimTransport() override;

  std::string_view name() const override { return "sim"; }
  int rank() const override { return rank_; }
  int size() const override { return fabric_->size(); }
  bool can_connect(int peer) const override { return peer >= 0 && peer < size(); }
  bool allows_concurrent_waits() const override { return false; }

  RequestPtr isend(int peer, uint32_t tag, const CallSignature& sig,
                   std::span<const std::byte> data) override;
  RequestPtr irecv(int peer, uint32_t tag, const CallSignature& sig,
                   std::span<std::byte> data) override;
  void wait_for_progress(Request& pending, std::chrono::nanoseconds timeout) override;
  void check_failed() override;
  void close() override {}
  void fail(chorus_result_t code, const std::string& message, const Spared& spared) override;
  // The output buffer of this rank's next call: receives into it are not
  // charged gamma.
  void set_output(std::span<const std::byte> output) { output_ = output; }

 private:
  std::shared_ptr<SimFabric> fabric_;
  int rank_;
  std::span<const std::byte> output_;
};

}  // namespace chorus::sim
