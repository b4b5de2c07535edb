// The CHORUS_* registry: every variable the library reads, its default, its
// documentation (chorus-info --config prints them) and its parser into
// Config. config.cpp reads the environment through it.
#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "base/core/config.hpp"
#include "base/core/error.hpp"
#include "base/core/text.hpp"

namespace chorus {
namespace {

// An int variable with a lower bound (values must also fit in an int: no
// silent wrap-around of e.g. CHORUS_WORLD_SIZE=4294967297 to 1).
ConfigVar int_var(const char* name, const char* def, const char* doc, int Config::*field,
                  int min_value) {
  return {name, def, doc,
          [field, min_value](Config& c, std::string_view v) {
            const int64_t n = parse_int(v);
            if (n < min_value || n > INT32_MAX)
              throw UsageError(fmt::format("{} is out of range [{}, {}]", n, min_value, INT32_MAX));
            c.*field = static_cast<int>(n);
          },
          [field](const Config& c) { return std::to_string(c.*field); }};
}
ConfigVar str_var(const char* name, const char* def, const char* doc, std::string Config::*field) {
  return {name, def, doc, [field](Config& c, std::string_view v) { c.*field = std::string(v); },
          [field](const Config& c) { return c.*field; }};
}
ConfigVar bytes_var(const char* name, const char* def, const char* doc,
                    std::size_t Config::*field) {
  return {name, def, doc, [field](Config& c, std::string_view v) { c.*field = parse_bytes(v); },
          [field](const Config& c) { return format_bytes(c.*field); }};
}
ConfigVar positive_var(const char* name, const char* def, const char* doc, double Config::*field) {
  return {name, def, doc,
          [field, name](Config& c, std::string_view v) {
            std::string text(v);
            char* end = nullptr;
            const double x = std::strtod(text.c_str(), &end);
            if (text.empty() || *end != '\0' || !(x > 0) || x > 1e12)
              throw UsageError(fmt::format("{} must be a positive number, not '{}'", name, v));
            c.*field = x;
          },
          [field](const Config& c) { return fmt::format("{}", c.*field); }};
}
ConfigVar seconds_var(const char* name, const char* def, const char* doc, double Config::*field) {
  return {name, def, doc,
          [field, name](Config& c, std::string_view v) {
            double s = parse_seconds(v);
            if (s <= 0) throw UsageError(fmt::format("{} must be positive", name));
            c.*field = s;
          },
          [field](const Config& c) { return fmt::format("{}", c.*field); }};
}

// A variable whose being set matters, not only its value: parsing it also
// raises `flag` (the defaults never go through the parser).
ConfigVar given(ConfigVar var, bool Config::*flag) {
  var.parse = [parse = std::move(var.parse), flag](Config& c, std::string_view v) {
    parse(c, v);
    c.*flag = true;
  };
  return var;
}

std::vector<ConfigVar> build_registry() {
  std::vector<ConfigVar> r;
  r.push_back(
      int_var("CHORUS_RANK", "-1", "Rank of this process (set by chorusrun).", &Config::rank, -1));
  r.push_back(int_var("CHORUS_WORLD_SIZE", "0", "Number of ranks in the job (set by chorusrun).",
                      &Config::world_size, 0));
  r.push_back(int_var("CHORUS_LOCAL_RANK", "-1", "Rank among the ranks on this host.",
                      &Config::local_rank, -1));
  r.push_back(
      int_var("CHORUS_LOCAL_SIZE", "0", "Number of ranks on this host.", &Config::local_size, 0));
  r.push_back(
      str_var("CHORUS_STORE_ADDR", "", "host:port of the rendezvous store.", &Config::store_addr));
  r.push_back(str_var("CHORUS_JOB_TOKEN", "",
                      "Shared secret of the job; connections without it are refused.",
                      &Config::job_token));
  r.push_back(str_var("CHORUS_HOST_ID", "",
                      "Overrides the host identity (which ranks share a machine).",
                      &Config::host_id));
  r.push_back({"CHORUS_LOG_LEVEL", "warn", "trace, debug, info, warn, error, critical or off.",
               [](Config& c, std::string_view v) {
                 static const char* levels[] = {"trace", "debug",    "info", "warn",
                                                "error", "critical", "off"};
                 std::string l = ascii_lower(v);
                 if (l == "warning") l = "warn";
                 for (auto* known : levels)
                   if (l == known) {
                     c.log_level = l;
                     return;
                   }
                 throw UsageError(fmt::format("unknown log level '{}'", v));
               },
               [](const Config& c) { return c.log_level; }});
  r.push_back(seconds_var("CHORUS_TIMEOUT", "300",
                          "Default deadline of every blocking call (seconds, or 500ms, 2m).",
                          &Config::timeout_s));
  r.push_back(seconds_var("CHORUS_CONNECT_TIMEOUT", "60",
                          "Deadline for bootstrap and connection set-up.",
                          &Config::connect_timeout_s));
  r.push_back({"CHORUS_SEGMENT_SIZE", "auto",
               "Largest message of a pipelined algorithm step (bytes, K/M/G suffixes); auto: "
               "256K to 1M by message size (see chorus-info --plan).",
               [](Config& c, std::string_view v) {
                 if (ascii_lower(v) == "auto") {
                   c.segment_bytes = 0;
                   return;
                 }
                 auto b = parse_bytes(v);
                 if (b < 8) throw UsageError("CHORUS_SEGMENT_SIZE must be at least 8 bytes");
                 c.segment_bytes = b;
               },
               [](const Config& c) {
                 return c.segment_bytes == 0 ? std::string("auto") : format_bytes(c.segment_bytes);
               }});
  r.push_back({"CHORUS_RING_ROUND", "auto",
               "A ring or Rabenseifner allreduce of at least 8 rounds runs round by round, so "
               "that each round's data stays in cache (bytes, K/M/G suffixes; off: the whole "
               "call at once); auto: 1M when every rank is on one host, else off.",
               [](Config& c, std::string_view v) {
                 const std::string lower = ascii_lower(v);
                 if (lower == "auto") {
                   c.ring_round_bytes.reset();
                   return;
                 }
                 if (lower == "off") {
                   c.ring_round_bytes = 0;
                   return;
                 }
                 const auto b = parse_bytes(v);
                 if (b != 0 && b < 64)
                   throw UsageError("CHORUS_RING_ROUND must be off or at least 64 bytes");
                 c.ring_round_bytes = b;
               },
               [](const Config& c) {
                 if (!c.ring_round_bytes) return std::string("auto");
                 return *c.ring_round_bytes == 0 ? std::string("off")
                                                 : format_bytes(*c.ring_round_bytes);
               }});
  r.push_back({"CHORUS_SPIN_US", "auto",
               "Microseconds a wait polls before it sleeps (0: sleep at once). auto: 50; when "
               "this host has more ranks than cores, the polling yields the core at every "
               "check.",
               [](Config& c, std::string_view v) {
                 if (ascii_lower(v) == "auto") {
                   c.spin_us = -1;
                   return;
                 }
                 const int64_t n = parse_int(v);
                 if (n < 0 || n > 10'000'000)
                   throw UsageError(fmt::format("{} is out of range [0, 10000000] (or auto)", n));
                 c.spin_us = static_cast<int>(n);
               },
               [](const Config& c) {
                 return c.spin_us < 0 ? std::string("auto") : std::to_string(c.spin_us);
               }});
  r.push_back({"CHORUS_WAIT_YIELD", "auto",
               "Whether a polling wait yields its core at every check: always, never, or auto "
               "(yield when this host runs more ranks than it has cores, so that a rank queued "
               "on our core can run; never otherwise: beside a CPU-bound process a yield costs "
               "milliseconds). A yielding wait that has met a CPU-bound task on its core sleeps "
               "at once instead, until a probe finds the core free.",
               [](Config& c, std::string_view v) {
                 const std::string m = ascii_lower(v);
                 if (m == "auto")
                   c.wait_yield = Config::WaitYield::automatic;
                 else if (m == "always")
                   c.wait_yield = Config::WaitYield::always;
                 else if (m == "never")
                   c.wait_yield = Config::WaitYield::never;
                 else
                   throw UsageError(
                       fmt::format("unknown wait yield '{}' (auto, always, never)", v));
               },
               [](const Config& c) {
                 switch (c.wait_yield) {
                   case Config::WaitYield::always:
                     return std::string("always");
                   case Config::WaitYield::never:
                     return std::string("never");
                   default:
                     return std::string("auto");
                 }
               }});
  r.push_back({"CHORUS_WAIT_SLICE_US", "100",
               "Scheduler time slice (microseconds, 100 to 100000) a waiting thread asks for "
               "while it yields, so that a CPU-bound task it yielded to gives the core back "
               "within it (Linux 6.12 and later; restored when the wait ends). 0: leave the "
               "thread's slice alone.",
               [](Config& c, std::string_view v) {
                 const int64_t n = parse_int(v);
                 if (n != 0 && (n < 100 || n > 100'000))
                   throw UsageError(fmt::format("{} is out of range: 0, or 100 to 100000", n));
                 c.wait_slice_us = static_cast<int>(n);
               },
               [](const Config& c) { return std::to_string(c.wait_slice_us); }});
  r.push_back({"CHORUS_TRANSPORT", "auto",
               "Force a transport: auto, tcp, ucx or shm. auto: shared-memory collectives when "
               "every rank is on this host, point-to-point over UCX between hosts that both have "
               "RDMA devices (where built), else TCP. tcp / "
               "ucx: everything over that transport. shm: shared-memory collectives (every rank "
               "must share the host), point-to-point over TCP.",
               [](Config& c, std::string_view v) {
                 std::string t = ascii_lower(v);
                 if (t != "auto" && t != "tcp" && t != "ucx" && t != "shm")
                   throw UsageError(fmt::format("unknown transport '{}' (auto, tcp, ucx, shm)", v));
                 c.transport = t;
               },
               [](const Config& c) { return c.transport; }});
  r.push_back({"CHORUS_SHM_CHUNK", "auto",
               "Bytes each rank reduces per round of a shared-memory collective (multiple of 64; "
               "K/M suffixes). auto: 256K / ranks (a round stays in cache), 512K / ranks when "
               "ranks outnumber cores (fewer rounds), there growing to 2M / ranks for a large "
               "allreduce while 4 rounds remain; at least 16K.",
               [](Config& c, std::string_view v) {
                 if (ascii_lower(v) == "auto") {
                   c.shm_chunk_bytes = 0;
                   return;
                 }
                 auto b = parse_bytes(v);
                 if (b < 64 || b % 64 != 0)
                   throw UsageError("CHORUS_SHM_CHUNK must be a positive multiple of 64 bytes");
                 c.shm_chunk_bytes = b;
               },
               [](const Config& c) {
                 return c.shm_chunk_bytes == 0 ? std::string("auto")
                                               : format_bytes(c.shm_chunk_bytes);
               }});
  r.push_back({"CHORUS_SHM_SMALL_MAX", "16K",
               "Largest shared-memory allreduce that takes the latency path (one "
               "synchronisation, every rank reduces everything); multiple of 64, 0 disables it.",
               [](Config& c, std::string_view v) {
                 auto b = parse_bytes(v);
                 if (b % 64 != 0 || b > (64u << 20))
                   throw UsageError("CHORUS_SHM_SMALL_MAX must be a multiple of 64 up to 64M");
                 c.shm_small_max = b;
               },
               [](const Config& c) { return format_bytes(c.shm_small_max); }});
  r.push_back(str_var("CHORUS_ALGO", "",
                      "Algorithm override: collective:lo-hi:algo[,lo-hi:algo][;...], e.g. "
                      "allreduce:0-64K:recursive_doubling,64K-inf:ring; a hierarchical "
                      "algorithm may name its stages' algorithms: "
                      "hierarchical(within=shm,across=ring).",
                      &Config::algo));
  r.push_back(str_var("CHORUS_TUNING_FILE", "",
                      "Tuning file written by chorus-tune (JSON): the measured winner per "
                      "collective, rank count, host count and size range, used after "
                      "CHORUS_ALGO and before the cost model.",
                      &Config::tuning_file));
  r.push_back(str_var("CHORUS_TCP_BIND_ADDR", "",
                      "Address TCP listens on (default: the address used to reach the store).",
                      &Config::tcp_bind_addr));
  r.push_back(bytes_var("CHORUS_TCP_SOCKET_BUFFER", "4M", "SO_SNDBUF/SO_RCVBUF of TCP sockets.",
                        &Config::tcp_socket_buffer));
  r.push_back(bytes_var("CHORUS_TCP_ZERO_COPY_MIN", "4K",
                        "Receive payloads of at least this size straight into user buffers.",
                        &Config::tcp_zero_copy_min));
  r.push_back({"CHORUS_FUSION_CYCLE_MS", "1",
               "Fusion engine: wait (ms) between negotiation cycles while tensors are pending, "
               "counted from the last cycle or the first pending tensor, whichever is later; a "
               "cycle starts sooner once every known tensor, or CHORUS_FUSION_BYTES of them, is "
               "submitted. With nothing pending a rank joins the cycles every 10 ms.",
               [](Config& c, std::string_view v) {
                 const std::string text(v);
                 char* end = nullptr;
                 const double ms = std::strtod(text.c_str(), &end);
                 if (end != text.c_str() + text.size() || !(ms > 0 && ms <= 10000))
                   throw UsageError("CHORUS_FUSION_CYCLE_MS must be in (0, 10000]");
                 c.fusion_cycle_ms = ms;
               },
               [](const Config& c) { return fmt::format("{}", c.fusion_cycle_ms); }});
  r.push_back(bytes_var("CHORUS_FUSION_BYTES", "64M",
                        "Fusion engine: largest fused buffer; larger tensors go alone.",
                        &Config::fusion_bytes));
  r.push_back({"CHORUS_FUSION_ALONE", "auto",
               "Fusion engine: tensors of this size or more are reduced alone, where they lie, "
               "unless they lie right after the bucket's previous tensor on every rank (a run, "
               "reduced where it lies). auto: none where a bucket's allreduce reads its tensors "
               "where they lie (one shared-memory domain), else 64K (measured on 2 cores: above "
               "about 64K, copying tensors into and out of a fused buffer costs more than the "
               "calls it saves).",
               [](Config& c, std::string_view v) {
                 if (v == "auto")
                   c.fusion_alone.reset();
                 else
                   c.fusion_alone = parse_bytes(v);
               },
               [](const Config& c) {
                 return c.fusion_alone ? format_bytes(*c.fusion_alone) : std::string("auto");
               }});
  r.push_back(seconds_var("CHORUS_FUSION_STALL_S", "60",
                          "Fusion engine: warn about a tensor that some ranks submitted and "
                          "others did not after this long (it fails at CHORUS_TIMEOUT).",
                          &Config::fusion_stall_s));
  r.push_back(given(positive_var("CHORUS_NET_ALPHA_US", "30",
                                 "Cost model: microseconds of a message step between hosts "
                                 "(latency of the network plus the transport's own). Set, it "
                                 "wins over the link probe (CHORUS_LINK_PROBE).",
                                 &Config::net_alpha_us),
                    &Config::net_given));
  r.push_back(given(positive_var("CHORUS_NET_GBPS", "10",
                                 "Cost model: each host's network link, Gbit/s (the messages that "
                                 "leave a host at once share it). Set, it wins over the link "
                                 "probe (CHORUS_LINK_PROBE).",
                                 &Config::net_gbps),
                    &Config::net_given));
  r.push_back({"CHORUS_LINK_PROBE", "1",
               "Measure the link between hosts (latency and Gbit/s) at init, between the host "
               "leaders, in well under a second; every rank then uses the slowest link seen. "
               "Off, or with CHORUS_NET_ALPHA_US / CHORUS_NET_GBPS set, those values are used.",
               [](Config& c, std::string_view v) { c.link_probe = parse_bool(v); },
               [](const Config& c) { return std::string(c.link_probe ? "1" : "0"); }});
  r.push_back({"CHORUS_AGREE", "256K",
               "Verdict round: a collective returns success only once every rank still alive "
               "has its result, so that a rank that dies in the middle of a call, or just "
               "after it, leaves every survivor with the same verdict. One more "
               "synchronisation per call: 1 (every call), 0 (none), or a size: calls of at "
               "least that many bytes (count x element size), where it costs nothing "
               "measurable. Below the size, calls of 3 or more ranks that could split take it "
               "too, unless their algorithm cannot split (shared memory, rooted calls) or a "
               "kept result settles them (CHORUS_KEEP_RESULT); 0 turns all of that off.",
               [](Config& c, std::string_view v) {
                 std::optional<bool> every;
                 try {
                   every = parse_bool(v);
                 } catch (const UsageError&) {  // a size, then
                 }
                 c.agree_min_bytes = every ? (*every ? 0 : Config::kAgreeNever) : parse_bytes(v);
               },
               [](const Config& c) {
                 if (c.agree_min_bytes == Config::kAgreeNever) return std::string("0");
                 if (c.agree_min_bytes == 0) return std::string("1");
                 return format_bytes(c.agree_min_bytes);
               }});
  r.push_back({"CHORUS_KEEP_RESULT", "128K",
               "Below the verdict round's size: the results of allreduce, allgather(v) and "
               "broadcast calls up to this many bytes (and every barrier) of 3 or more ranks "
               "over a transport are copied aside, so that a survivor that failed the call on "
               "a peer's death takes the result of one that finished it, and every survivor "
               "gets the same verdict. The copy costs each such call its result's memcpy, "
               "less than the round it replaces; larger ones take the round. 0 keeps none "
               "(barriers too), at most 1M.",
               [](Config& c, std::string_view v) {
                 c.keep_result_bytes = parse_bytes(v);
                 if (c.keep_result_bytes > (std::size_t(1) << 20))
                   throw UsageError(fmt::format(
                       "CHORUS_KEEP_RESULT={}: at most 1M (results travel in one frame)", v));
               },
               [](const Config& c) { return format_bytes(c.keep_result_bytes); }});
  r.push_back(int_var("CHORUS_FUSION_CACHE", "1024",
                      "Fusion engine: tensor names remembered for the one-collective "
                      "negotiation (a byte each per cycle); later names negotiate in full.",
                      &Config::fusion_cache, 0));
  r.push_back(str_var("CHORUS_TIMELINE", "",
                      "Write a Chrome trace of the fusion engine's work to PATH.rankN.json.",
                      &Config::timeline));
  r.push_back({"CHORUS_WIRE_DTYPE", "none",
               "Compression on the wire for float32 allreduce: none, bf16 or f16. The data "
               "travels as that type, each reduction step computes in float32, the result is "
               "float32 again and bit-identical on every rank; relative error at most about "
               "ranks * 2^-8 (bf16) or ranks * 2^-11 (f16). Every rank must set the same. Other "
               "dtypes and collectives ignore it; chorus_allreduce_ex overrides it per call.",
               [](Config& c, std::string_view v) {
                 const std::string t = ascii_lower(v);
                 if (t == "none" || t == "") {
                   c.wire_dtype.reset();
                   return;
                 }
                 if (t == "bf16" || t == "bfloat16") {
                   c.wire_dtype = DataType::bf16;
                   return;
                 }
                 if (t == "f16" || t == "fp16" || t == "float16" || t == "half") {
                   c.wire_dtype = DataType::f16;
                   return;
                 }
                 throw UsageError(fmt::format("unknown wire dtype '{}' (none, bf16 or f16)", v));
               },
               [](const Config& c) {
                 if (!c.wire_dtype) return std::string("none");
                 return std::string(*c.wire_dtype == DataType::bf16 ? "bf16" : "f16");
               }});
  r.push_back(int_var("CHORUS_CHECK_REPLICAS", "0",
                      "Mirrored strategy: every this many steps (chorus_mirrored_end_step) "
                      "compare a digest of every variable on every rank and fail everywhere "
                      "with CHORUS_ERR_MISMATCH naming the first that diverged; 0: never.",
                      &Config::check_replicas, 0));
  return r;
}

}  // namespace

std::span<const ConfigVar> config_registry() {
  static const std::vector<ConfigVar> registry = build_registry();
  return registry;
}

}  // namespace chorus
