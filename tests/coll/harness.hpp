// Runs N thread-ranks over an InprocFabric, each with its own transport,
// scratch pool and CollectiveContext. Rank bodies must not use Catch2
// assertions (not thread-safe): they fill buffers owned by the test, which
// checks them after run_ranks returns.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/core/scratch.hpp"
#include "collectives/context.hpp"
#include "collectives/team_hierarchy.hpp"
#include "collectives/tuner/selection.hpp"
#include "transports/transport.hpp"

namespace chorus::test {

// shm: the shared-memory collectives (a shm::Domain per rank) with TCP as the
// control channel.
enum class TransportKind { inproc, tcp, shm, ucx };

// The transport the sweeps run over: each collective test binary shares the
// same compiled sources and compiles only default_transport.cpp itself, with
// CHORUS_TEST_TCP (coll_tests_tcp: real loopback TCP), CHORUS_TEST_UCX
// (coll_tests_ucx, tests/coll/ucx_world.hpp), CHORUS_TEST_SHM
// (coll_tests_shm: the shared-memory collectives) or none (coll_tests: the
// in-process transport).
TransportKind default_transport();

struct RunOptions {
  std::size_t segment_bytes = 64;
  std::chrono::milliseconds timeout{30000};
  int spin_us = 20;
  // After a rank's first error, abort the transport so the others fail promptly.
  bool abort_on_error = true;
  // Ranks for which this returns false never start (no thread, no transport).
  std::function<bool(int)> participates;
  TransportKind transport = default_transport();
  // shm: the domain's piece size (the pipeline's chunk) and latency-path size.
  std::size_t shm_piece_bytes = 64;
  std::size_t shm_small_bytes = 256;
  // The smallest piece an allreduce takes (shm::Layout::base_piece_bytes; 0:
  // shm_piece_bytes): below shm_piece_bytes, pieces vary with the call's size.
  std::size_t shm_base_piece_bytes = 0;
  // Simulated hosts: one letter per rank, equal letters for ranks on one host
  // ("aabbb": ranks 0-1 on one host, 2-4 on another). Set, the whole team gets
  // a Hierarchy whose host teams run over the point-to-point transport.
  std::string hosts;
  // CollectiveContext::ring_round_bytes of every context (0: whole calls).
  std::size_t ring_round_bytes = 0;
};

struct RankOutcome {
  bool ran = false;
  chorus_result_t code = CHORUS_SUCCESS;
  std::string message;
};

class RankEnv {
 public:
  RankEnv(Transport& t, const RunOptions& options, shm::Domain* domain, uint64_t seq_base)
      : transport(t),
        shm(domain),
        team(Team::whole(t, 1, domain)),
        options_(options),
        seq_base_(seq_base) {
    if (!options.hosts.empty()) join_hosts(options.hosts);
  }
  int rank() const { return transport.rank(); }
  int size() const { return transport.size(); }
  // A context for one call over the whole team, its deadline starting now.
  // Over a world reused from earlier runs (TCP, UCX, shared memory), sequence
  // numbers are offset per run so that calls of different runs never share
  // one, as in a communicator: a message or announcement left over from an
  // earlier run then fails the signature check instead of matching.
  CollectiveContext context(CallSignature sig) {
    sig.seq += seq_base_;
    CollectiveContext ctx =
        CollectiveContext::over(team, scratch, sig, Deadline::after(options_.timeout),
                                options_.segment_bytes, options_.spin_us);
    ctx.ring_round_bytes = options_.ring_round_bytes;
    return ctx;
  }

  ScratchPool scratch;
  Transport& transport;
  shm::Domain* shm;  // set when the run is over TransportKind::shm
  Team team;         // every rank, tag 1, the domain (if any)
  // With RunOptions::hosts: this rank's host team (tag 2) and the hierarchy
  // (tags 4 to 7), chosen with the default override and cost model.
  AlgoOverride user;
  CostModel model;
  std::optional<Team> host;
  std::unique_ptr<TeamHierarchy> hierarchy;

 private:
  void join_hosts(const std::string& hosts);

  const RunOptions& options_;
  uint64_t seq_base_;
};

// A run in which rank `absent` never starts and every other rank must reach
// its own deadline, `timeout` after its call began.
RunOptions absent_rank_run(int absent, std::chrono::milliseconds timeout);

// Every rank's transport stays open until all bodies have returned, so an
// early finisher never turns a peer's timeout into a peer failure.
std::vector<RankOutcome> run_ranks(int n, const RunOptions& options,
                                   const std::function<void(RankEnv&)>& body);

CallSignature make_sig(CollectiveKind kind, uint64_t seq, uint64_t count, DataType dtype,
                       ReduceOp op = ReduceOp::sum, int64_t root = -1);

// "" when every started rank succeeded; else one line per failed rank.
std::string failures(const std::vector<RankOutcome>& outcomes);

}  // namespace chorus::test
