// The single registry of CHORUS_* variables. Each variable has a name, a
// default, a doc line and a parser that stores into Config. The process-wide
// Config is read once, on first use; tests build their own from a map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/core/dtype.hpp"
#include "base/core/wait_policy.hpp"

namespace chorus {

struct Config {
  // Bootstrap (set by chorusrun; other launchers' variables are read in base/bootstrap).
  int rank = -1;
  int world_size = 0;
  int local_rank = -1;
  int local_size = 0;
  std::string store_addr;
  std::string job_token;
  std::string host_id;  // overrides the detected host identity (tests, containers)

  std::string log_level = "warn";
  double timeout_s = 300;         // default deadline of every blocking call
  double net_alpha_us = 30;       // cost model: a message step between hosts
  double net_gbps = 10;           // cost model: a host's link, Gbit/s
  double connect_timeout_s = 60;  // bootstrap and connection set-up
  std::size_t segment_bytes = 0;  // pipelining unit of ring algorithms; 0: auto (tuner)
  // Ring allreduce's rounds (CHORUS_RING_ROUND); nullopt: auto, 0: off.
  std::optional<std::size_t> ring_round_bytes;
  int spin_us = -1;  // spin before sleeping in waits; -1: auto (resolve_spin_us)
  // CHORUS_WAIT_YIELD, parsed once: wait_spin runs on every call's path.
  enum class WaitYield { automatic, always, never } wait_yield = WaitYield::automatic;
  int wait_slice_us = 100;            // scheduler slice while a wait yields; 0: leave it
  std::string transport = "auto";     // auto | tcp | ucx | shm
  std::size_t shm_chunk_bytes = 0;    // per-rank piece of a shm round; 0: auto
  std::size_t shm_small_max = 16384;  // shm allreduce latency path up to this size
  std::string algo;                   // override grammar, e.g. "allreduce:0-64K:ring"
  std::string tuning_file;            // chorus-tune's measured choices (JSON); empty: none
  std::string tcp_bind_addr;  // address to listen on; default: the one used to reach the store
  std::size_t tcp_socket_buffer = 4 << 20;
  std::size_t tcp_zero_copy_min = 4096;  // receive straight into user buffers from this size
  // Fusion engine (lib/fusion/engine.hpp).
  double fusion_cycle_ms = 1;           // longest wait between negotiation cycles
  std::size_t fusion_bytes = 64 << 20;  // largest fused buffer
  // Tensors of this size or more are reduced alone; nullopt ("auto"): the
  // engine chooses (lib/fusion/engine.hpp, kPackedAloneBytes).
  std::optional<std::size_t> fusion_alone;
  double fusion_stall_s = 60;  // warn about a tensor some ranks lack after this
  int fusion_cache = 1024;     // known tensor names (fast-path negotiation)
  std::string timeline;        // Chrome trace of fused work: path prefix; "": none
  // float32 allreduce: dtype on the wire (bf16 or f16); nullopt: not compressed
  std::optional<DataType> wire_dtype;
  // Mirrored strategy (lib/strategy/mirrored.hpp): compare every rank's
  // variables every this many steps; 0: never.
  int check_replicas = 0;
  // The link between hosts (lib/comm/link_probe.hpp): measured at init
  // unless CHORUS_LINK_PROBE=0 or the user set CHORUS_NET_ALPHA_US or
  // CHORUS_NET_GBPS (net_given), which then win.
  bool link_probe = true;
  bool net_given = false;
  // Collectives of at least this many bytes (count x element size) end with
  // a verdict round (collectives/verdict/agree.hpp); kAgreeNever: none.
  static constexpr std::size_t kAgreeNever = SIZE_MAX;
  std::size_t agree_min_bytes = 256 << 10;
  bool agrees(uint64_t call_bytes) const {
    return agree_min_bytes != kAgreeNever && call_bytes >= agree_min_bytes;
  }
  // Below the round, results of at most this many bytes of the calls whose
  // result every rank holds are kept for a survivor that failed the call
  // (collectives/verdict/recover.hpp, plan.hpp); 0: none.
  std::size_t keep_result_bytes = 128 << 10;
};

// An environment to read from: the process's, or a map in tests.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
EnvLookup process_env();
EnvLookup map_env(std::map<std::string, std::string> values);

struct ConfigVar {
  const char* name;
  const char* default_value;  // as the user would write it
  const char* doc;
  std::function<void(Config&, std::string_view)> parse;  // throws UsageError
  std::function<std::string(const Config&)> show;
};

std::span<const ConfigVar> config_registry();

// Parses every registered variable present in env; throws UsageError naming the
// variable and the bad value.
Config load_config(const EnvLookup& env);

// CHORUS_SPIN_US=auto: 50 us. With more ranks than cores the spin yields the
// core at every check (Spin::yield_each), so it no longer steals the core its
// peer needs (measured on 2 cores, 8 ranks over TCP, 8 B-2K: 103-132 us per
// allreduce spinning so, against 137-195 us sleeping at once).
int resolve_spin_us(int configured);
// How this process's waits poll (wait_policy.hpp): CHORUS_SPIN_US, and a yield
// at every check when CHORUS_WAIT_YIELD says so (auto: when this host runs
// more of the job's ranks than it has cores, `oversubscribed`).
Spin wait_spin(const Config& config, bool oversubscribed);
// Cores this process may run on (its CPU affinity).
int online_cores();

// The process-wide configuration, read from the environment once.
const Config& global_config();

// Parsers shared with command-line tools. All throw UsageError.
std::size_t parse_bytes(std::string_view text);  // "4096", "64K", "1M", "2G"
double parse_seconds(std::string_view text);     // "30", "1.5", "500ms", "2m"
int64_t parse_int(std::string_view text);
bool parse_bool(std::string_view text);
std::string format_bytes(std::size_t bytes);  // 65536 -> "64K"

}  // namespace chorus
