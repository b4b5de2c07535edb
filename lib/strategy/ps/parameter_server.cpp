#include "lib/strategy/ps/parameter_server.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/core/config.hpp"
#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "collectives/call.hpp"
#include "lib/strategy/ps/checkpoint.hpp"
#include "lib/strategy/ps/server.hpp"
#include "lib/strategy/ps/sharding.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace chorus::strategy::ps {

namespace {

Role role_of(int rank, int size, int servers) {
  if (rank >= size - servers) return Role::server;
  return rank == 0 ? Role::chief : Role::worker;
}

// servers 0: as many as TF_CONFIG has ps tasks (chorusrun --ps K writes it).
int servers_from_tf_config() {
  auto text = process_env()("TF_CONFIG");
  if (!text)
    throw UsageError(
        "parameter server: servers 0 takes the count from TF_CONFIG, which is not "
        "set (start the job with chorusrun --ps K, or pass the count)");
  try {
    const auto cluster = nlohmann::json::parse(*text).at("cluster");
    return cluster.contains("ps") ? static_cast<int>(cluster.at("ps").size()) : 0;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(fmt::format("parameter server: TF_CONFIG has no cluster: {}", e.what()));
  }
}

Options checked(Options o, int size) {
  if (o.servers == 0) o.servers = servers_from_tf_config();
  if (o.servers < 1 || o.servers >= size)
    throw UsageError(
        fmt::format("parameter server: {} server(s) among {} ranks (at least one, "
                    "and a chief beside them)",
                    o.servers, size));
  if (size > 64) throw UsageError(fmt::format("parameter server: {} ranks; at most 64", size));
  if (o.mode != Mode::async && o.mode != Mode::sync && o.mode != Mode::bounded)
    throw UsageError(fmt::format("parameter server: unknown mode {}", static_cast<int>(o.mode)));
  if (o.max_staleness < 0)
    throw UsageError(
        fmt::format("parameter server: max_staleness {} is negative", o.max_staleness));
  return o;
}

// A namespace in the job's store that no other instance uses: the
// communicator's rank 0 draws it and broadcasts it.
std::string instance_prefix(Communicator& comm, const Deadline& deadline) {
  int64_t id = 0;
  if (comm.rank() == 0) id = comm.link().store->add(comm.link().store_prefix + "ps/instances", 1);
  CollectiveCall call;
  call.kind = CollectiveKind::broadcast;
  call.send = &id;
  call.recv = &id;
  call.count = 1;
  call.dtype = DataType::i64;
  call.root = 0;
  comm.run(call, deadline);
  return fmt::format("{}ps{}/", comm.link().store_prefix, id);
}

}  // namespace

ParameterServer::ParameterServer(Communicator& comm, Options options)
    : comm_(comm),
      options_(checked(options, comm.size())),
      rank_(comm.rank()),
      size_(comm.size()),
      role_(role_of(comm.rank(), comm.size(), options_.servers)),
      shard_bytes_(static_cast<std::size_t>(options_.servers), 0),
      buffers_(static_cast<std::size_t>(options_.servers)) {
  const Deadline deadline = comm.default_deadline();
  tcp::TcpOptions tcp;
  tcp.rank = rank_;
  tcp.size = size_;
  tcp.token = comm.link().job_token;
  tcp.bind_host = comm.link().tcp_bind_host.empty() ? "127.0.0.1" : comm.link().tcp_bind_host;
  tcp.key_prefix = instance_prefix(comm, deadline) + "tcp/";
  tcp.connect_timeout_s = comm.config().connect_timeout_s;
  tcp.close_timeout_s = 5;
  tcp.isolate_peer_failures = true;
  transport_ = std::make_unique<tcp::TcpTransport>(*comm.link().store, tcp);
  log().debug("rank {}: parameter-server strategy, role {} {}, {} server(s), mode {}", rank_,
              static_cast<int>(role_), role_index(), options_.servers,
              static_cast<int>(options_.mode));
}

ParameterServer::~ParameterServer() {
  try {
    transport_->close();
  } catch (...) {
  }
}

int ParameterServer::role_index() const {
  switch (role_) {
    case Role::chief:
      return 0;
    case Role::worker:
      return rank_ - 1;
    case Role::server:
      return rank_ - (size_ - options_.servers);
  }
  return 0;
}

void ParameterServer::check_role(bool worker_call, const char* call) const {
  if (!started_) throw UsageError(fmt::format("parameter server: {} before start()", call));
  if (finished_)
    throw UsageError(CHORUS_ERR_INVALID_USAGE,
                     fmt::format("parameter server: {} after finish()", call));
  if (worker_call == (role_ == Role::server))
    throw UsageError(fmt::format("parameter server: {} is for {}; rank {} is a {}", call,
                                 worker_call ? "workers" : "servers", rank_,
                                 role_ == Role::server ? "server" : "worker"));
}

void ParameterServer::add_variable(const std::string& name, void* data, void* gradient,
                                   std::size_t count, DataType dtype) {
  if (started_)
    throw UsageError(fmt::format("parameter server: add_variable('{}') after start()", name));
  if (dtype != DataType::f32 && dtype != DataType::f64)
    throw UsageError(fmt::format("parameter server: variable '{}' is {}; float32 or float64", name,
                                 dtype_name(dtype)));
  if (role_ != Role::server && (data == nullptr || gradient == nullptr) && count > 0)
    throw UsageError(fmt::format(
        "parameter server: variable '{}' needs its data and gradient on a worker", name));
  for (const auto& v : variables_)
    if (v.name == name)
      throw UsageError(fmt::format("parameter server: variable '{}' added twice", name));
  Variable v;
  v.name = name;
  v.data = static_cast<std::byte*>(data);
  v.gradient = static_cast<std::byte*>(gradient);
  v.count = count;
  v.dtype = dtype;
  variables_.push_back(v);
}

void ParameterServer::start(const Deadline& deadline) {
  if (started_) throw UsageError("parameter server: start() called twice");
  std::vector<std::size_t> bytes;
  for (const auto& v : variables_) bytes.push_back(v.bytes());
  std::vector<int> shard_of = assign_shards(bytes, options_.servers);
  for (std::size_t i = 0; i < variables_.size(); ++i) {
    Variable& v = variables_[i];
    v.shard = shard_of[i];
    v.offset = shard_bytes_[static_cast<std::size_t>(v.shard)];
    shard_bytes_[static_cast<std::size_t>(v.shard)] += v.bytes();
  }
  started_ = true;
  if (role_ == Role::server) {
    const int me = role_index();
    std::vector<Variable> mine;
    for (const auto& v : variables_)
      if (v.shard == me) mine.push_back(v);
    std::vector<int> workers;
    for (int r = 0; r < size_ - options_.servers; ++r) workers.push_back(r);
    server_ = std::make_unique<Server>(*transport_, options_, std::move(mine),
                                       shard_bytes_[static_cast<std::size_t>(me)], workers);
    server_->receive_initial(0, deadline);
    log().info("parameter server {} (rank {}): {} variable(s), {} bytes", me, rank_,
               std::count_if(variables_.begin(), variables_.end(),
                             [&](const Variable& v) { return v.shard == me; }),
               shard_bytes_[static_cast<std::size_t>(me)]);
  } else if (role_ == Role::chief) {
    for (int s = 0; s < options_.servers; ++s)
      pack(s, false, buffers_[static_cast<std::size_t>(s)]);
    round_trip(Kind::set, true, false, deadline);
  }
  // Nobody pulls before every server has the chief's values.
  CollectiveCall barrier;
  barrier.kind = CollectiveKind::barrier;
  comm_.run(barrier, deadline);
}

void ParameterServer::pack(int shard, bool gradients, std::vector<std::byte>& buffer) const {
  buffer.resize(shard_bytes_[static_cast<std::size_t>(shard)]);
  for (const auto& v : variables_)
    if (v.shard == shard)
      std::memcpy(buffer.data() + v.offset, gradients ? v.gradient : v.data, v.bytes());
}

void ParameterServer::unpack(int shard, const std::vector<std::byte>& buffer) {
  for (const auto& v : variables_)
    if (v.shard == shard) std::memcpy(v.data, buffer.data() + v.offset, v.bytes());
}

void ParameterServer::server_failed(int server, const std::exception_ptr& error) const {
  std::string why = "unknown error";
  chorus_result_t code = CHORUS_ERR_PEER_FAILURE;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    why = e.what();
    if (e.code() == CHORUS_ERR_TIMEOUT) code = CHORUS_ERR_TIMEOUT;
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (code == CHORUS_ERR_TIMEOUT)  // alive, maybe holding this step back for a slower worker
    throw IoError(code, fmt::format("no answer from parameter server {} (rank {}) in time: {}",
                                    server, server_rank(server), why));
  throw IoError(code, fmt::format("parameter server {} (rank {}) failed: {}", server,
                                  server_rank(server), why));
}

void ParameterServer::round_trip(Kind kind, bool send_payload, bool expect_payload,
                                 const Deadline& deadline) {
  // A round trip that failed leaves requests in flight that may still
  // complete into the headers and buffers (members, so they stay valid); the
  // strategy is broken from then on.
  if (broken_) std::rethrow_exception(broken_);
  const int servers = options_.servers;
  std::vector<Header>& requests = request_headers_;
  std::vector<Header>& replies = reply_headers_;
  requests.assign(static_cast<std::size_t>(servers), Header{});
  replies.assign(static_cast<std::size_t>(servers), Header{});
  std::vector<RequestPtr> sends, receives;
  for (int s = 0; s < servers; ++s) {
    auto& buffer = buffers_[static_cast<std::size_t>(s)];
    Header& h = requests[static_cast<std::size_t>(s)];
    h.kind = static_cast<uint32_t>(kind);
    h.step = step_;
    h.bytes = send_payload ? buffer.size() : 0;
    const int peer = server_rank(s);
    sends.push_back(transport_->isend(peer, kRequestTag, message_signature(sizeof h),
                                      {reinterpret_cast<std::byte*>(&h), sizeof h}));
    if (send_payload)
      sends.push_back(
          transport_->isend(peer, kPayloadTag, message_signature(buffer.size()), buffer));
    receives.push_back(transport_->irecv(
        peer, kReplyTag, message_signature(sizeof(Header)),
        {reinterpret_cast<std::byte*>(&replies[static_cast<std::size_t>(s)]), sizeof(Header)}));
  }
  const char* what = kind == Kind::pull ? "parameter server pull" : "parameter server request";
  // Wait per server, so that a failure is blamed on the server it came from.
  auto settle = [&](int s, const RequestPtr& r) {
    try {
      wait_one(*transport_, r, deadline, 0, what);
    } catch (const Error&) {
      try {
        server_failed(s, std::current_exception());
      } catch (...) {
        broken_ = std::current_exception();
        throw;
      }
    }
  };
  for (int s = 0; s < servers; ++s) settle(s, receives[static_cast<std::size_t>(s)]);
  for (std::size_t i = 0; i < sends.size(); ++i)
    settle(send_payload ? static_cast<int>(i / 2) : static_cast<int>(i), sends[i]);
  uint64_t failed = 0;
  for (const Header& h : replies) failed |= h.failed;
  note_failures(failed);
  if (!expect_payload) return;
  receives.clear();
  for (int s = 0; s < servers; ++s) {
    auto& buffer = buffers_[static_cast<std::size_t>(s)];
    buffer.resize(shard_bytes_[static_cast<std::size_t>(s)]);
    receives.push_back(transport_->irecv(server_rank(s), kReplyPayloadTag,
                                         message_signature(buffer.size()), buffer));
  }
  for (int s = 0; s < servers; ++s) settle(s, receives[static_cast<std::size_t>(s)]);
}

void ParameterServer::note_failures(uint64_t failed) {
  std::lock_guard lock(failed_mu_);
  const uint64_t fresh = failed & ~failed_;
  failed_ |= failed;
  for (int r = 0; r < 64; ++r) {
    if (!(fresh & (uint64_t{1} << r))) continue;
    int live = size_ - options_.servers - std::popcount(failed_);
    if (role_ == Role::chief)
      log().warn("chief: worker rank {} failed; training goes on with {} worker(s)", r, live);
    else
      log().debug("rank {}: worker rank {} failed", rank_, r);
  }
}

std::vector<int> ParameterServer::failed_workers() const {
  std::lock_guard lock(failed_mu_);
  std::vector<int> ranks;
  for (int r = 0; r < 64; ++r)
    if (failed_ & (uint64_t{1} << r)) ranks.push_back(r);
  return ranks;
}

void ParameterServer::pull(const Deadline& deadline) {
  check_role(true, "pull");
  round_trip(Kind::pull, false, true, deadline);
  for (int s = 0; s < options_.servers; ++s) unpack(s, buffers_[static_cast<std::size_t>(s)]);
}

void ParameterServer::push(const Deadline& deadline) {
  check_role(true, "push");
  for (int s = 0; s < options_.servers; ++s) pack(s, true, buffers_[static_cast<std::size_t>(s)]);
  round_trip(Kind::push, true, false, deadline);
  ++step_;
}

void ParameterServer::finish(const Deadline& deadline) {
  check_role(true, "finish");
  round_trip(Kind::done, false, false, deadline);
  finished_ = true;
}

void ParameterServer::serve(const OptimizerOptions& optimizer) {
  check_role(false, "serve");
  server_->serve(optimizer);
}

void ParameterServer::save(const std::string& path, const Deadline& deadline) {
  check_role(true, "save");
  if (role_ != Role::chief) throw UsageError("parameter server: save is the chief's (rank 0)");
  round_trip(Kind::read, false, true, deadline);
  std::vector<CheckpointEntry> entries;
  for (const auto& v : variables_)
    entries.push_back(
        {v.name, v.dtype, v.count, buffers_[static_cast<std::size_t>(v.shard)].data() + v.offset});
  write_checkpoint(path, entries, step_);
}

void ParameterServer::restore(const std::string& path, const Deadline& deadline) {
  check_role(true, "restore");
  if (role_ != Role::chief) throw UsageError("parameter server: restore is the chief's (rank 0)");
  std::vector<CheckpointEntry> entries;
  for (const auto& v : variables_) entries.push_back({v.name, v.dtype, v.count, v.data});
  read_checkpoint(path, entries);  // into the chief's own copies
  for (int s = 0; s < options_.servers; ++s) pack(s, false, buffers_[static_cast<std::size_t>(s)]);
  round_trip(Kind::set, true, false, deadline);
}

}  // namespace chorus::strategy::ps
