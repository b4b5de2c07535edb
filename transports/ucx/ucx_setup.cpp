// Set-up and teardown of the UCX transport: configuration, context, worker,
// endpoints, the hello exchange, and the watch over peer processes.
#include <stdio.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "base/core/error.hpp"
#include "base/core/log.hpp"
#include "transports/ucx/ucx_tls.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace chorus::ucx {
namespace {

std::string ucx_error(const char* what, ucs_status_t status) {
  return fmt::format("{} failed: {}", what, ucs_status_string(status));
}

// A setting as UCX parsed it (from UCX_* variables and modifications).
std::string config_value(const ucp_config_t* config, const std::string& key) {
  char* text = nullptr;
  std::size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (!stream) return "";
  ucp_config_print(config, stream, nullptr, UCS_CONFIG_PRINT_CONFIG);
  fclose(stream);
  std::istringstream lines(std::string(text, length));
  free(text);
  const std::string prefix = "UCX_" + key + "=";
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  return "";
}

// State and start time (clock ticks after boot) of a process; false if it
// does not exist (in this pid namespace).
bool read_process(int64_t pid, char* state, uint64_t* start_time) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text;
  if (!in || !std::getline(in, text)) return false;
  auto paren = text.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return false;
  std::istringstream fields(text.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 3) *state = field.empty() ? '?' : field[0];
    if (i == 22) {
      *start_time = std::strtoull(field.c_str(), nullptr, 10);
      return true;
    }
  }
  return false;
}

std::string read_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

}  // namespace

UcxTransport::UcxTransport(Store& store, UcxOptions options)
    : options_(std::move(options)), peers_(options_.size > 0 ? options_.size : 0) {
  CHORUS_CHECK(options_.rank >= 0 && options_.rank < options_.size && options_.size <= kMaxRanks,
               "rank {} of world size {}", options_.rank, options_.size);
  job_ = job_hash(options_.token);
  for (int r = 0; r < options_.size; ++r) {
    peers_[r].self = this;
    peers_[r].rank = r;
  }
  self_pid_ = getpid();
  char state;
  read_process(self_pid_, &state, &self_start_);
  boot_id_ = read_boot_id();
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  try {
    if (wake_fd_ < 0 || stop_fd_ < 0) throw IoError(CHORUS_ERR_IO, errno_message("eventfd", errno));
    init_context();
    init_worker();
    connect(store);
  } catch (...) {
    teardown();
    throw;
  }
  progress_ = std::thread([this] { progress_loop(); });
}

UcxTransport::~UcxTransport() {
  try {
    close();
  } catch (const std::exception& e) {
    log().warn("rank {}: error while closing: {}", options_.rank, e.what());
  }
  stop_ = true;
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(stop_fd_, &one, sizeof one);
  futex_wake_all(spinners_);
  if (progress_.joinable()) progress_.join();
  teardown();
}

void UcxTransport::init_context() {
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK)
    throw IoError(CHORUS_ERR_IO, ucx_error("reading the UCX configuration", s));
  std::unique_ptr<ucp_config_t, void (*)(ucp_config_t*)> guard(config, ucp_config_release);
  // UCX_TLS and UCX_NET_DEVICES are the user's; only shared memory may be
  // taken out of the list, when the peers are on other hosts.
  tls_ = config_value(config, "TLS");
  if (!options_.allow_shared_memory) {
    auto without = tls_without_shm(tls_);
    if (!without)
      throw IoError(CHORUS_ERR_UNSUPPORTED,
                    fmt::format("UCX_TLS={} names only shared-memory transports, but rank {} has "
                                "peers on other hosts",
                                tls_, options_.rank));
    if (*without != tls_) {
      if (ucs_status_t s = ucp_config_modify(config, "TLS", without->c_str()); s != UCS_OK)
        throw IoError(CHORUS_ERR_IO, ucx_error(("setting UCX_TLS=" + *without).c_str(), s));
      tls_ = *without;
    }
  }
  peer_mode_ = !options_.allow_shared_memory || !tls_may_use_shm(tls_);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                      UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.estimated_num_eps = static_cast<std::size_t>(options_.size);
  params.mt_workers_shared = 0;
  params.name = "chorus";
  if (ucs_status_t s = ucp_init(&params, config, &context_); s != UCS_OK)
    throw IoError(CHORUS_ERR_IO, ucx_error("ucp_init", s));
  unsigned major, minor, release;
  ucp_get_version(&major, &minor, &release);
  log().debug("rank {}: UCX {}.{}.{}, UCX_TLS={}, peer failure from {}", options_.rank, major,
              minor, release, tls_, peer_mode_ ? "UCX" : "the process watch");
}

void UcxTransport::init_worker() {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // every call is under mu_
  if (ucs_status_t s = ucp_worker_create(context_, &params, &worker_); s != UCS_OK)
    throw IoError(CHORUS_ERR_IO, ucx_error("ucp_worker_create", s));
  if (ucs_status_t s = ucp_worker_get_efd(worker_, &efd_); s != UCS_OK)
    throw IoError(CHORUS_ERR_IO, ucx_error("ucp_worker_get_efd", s));
  if (ucs_status_t s = ucp_worker_get_address(worker_, &address_, &address_length_); s != UCS_OK)
    throw IoError(CHORUS_ERR_IO, ucx_error("ucp_worker_get_address", s));
  std::lock_guard lock(mu_);
  post_control_recv_locked();
}

void UcxTransport::connect(Store& store) {
  const int me = options_.rank, n = options_.size;
  auto deadline = Deadline::after(std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(options_.connect_timeout_s)));
  store.set(fmt::format("{}addr/{}", options_.key_prefix, me),
            std::string(reinterpret_cast<const char*>(address_), address_length_));
  for (int j = 0; j < n; ++j) {
    if (j == me) continue;
    std::string address = store.get(fmt::format("{}addr/{}", options_.key_prefix, j), deadline);
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(address.data());
    params.err_mode = peer_mode_ ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    params.err_handler.cb = on_ep_error;
    params.err_handler.arg = &peers_[j];
    std::lock_guard lock(mu_);
    if (ucs_status_t s = ucp_ep_create(worker_, &params, &peers_[j].ep); s != UCS_OK)
      throw IoError(CHORUS_ERR_BOOTSTRAP,
                    fmt::format("rank {} cannot reach rank {} through UCX (UCX_TLS={}): {}", me, j,
                                tls_, ucs_status_string(s)));
  }
  std::unique_lock lock(mu_);
  for (int j = 0; j < n; ++j)
    if (j != me) send_control_locked(j, ControlType::hello);
  auto all_hellos = [&] {
    for (int j = 0; j < n; ++j)
      if (j != me && !peers_[j].hello) return false;
    return true;
  };
  bool ok = drive_until(
      lock, [&] { return failure_ || all_hellos(); }, deadline);
  if (failure_) std::rethrow_exception(failure_.error);
  if (!ok) {
    std::string who;
    for (int j = 0; j < n; ++j)
      if (j != me && !peers_[j].hello) who += fmt::format("{}{}", who.empty() ? "" : ", ", j);
    throw IoError(CHORUS_ERR_TIMEOUT,
                  fmt::format("rank {}: timed out waiting for the UCX hello of ranks {}", me, who));
  }
  log().debug("rank {}: connected to all {} peers through UCX", me, n - 1);
}

// A peer on this host in another process, visible in our pid namespace, is
// watched: UCX (error mode NONE, for shared memory) would not notice its death.
void UcxTransport::on_hello(int peer, const ControlHeader& h) {
  Peer& p = peers_[peer];
  p.hello = true;
  if (peer_mode_ || h.pid <= 0 || h.pid == self_pid_) return;
  std::string boot(h.boot_id, strnlen(h.boot_id, sizeof h.boot_id));
  char state;
  uint64_t start = 0;
  if (boot.empty() || boot != boot_id_ || !read_process(h.pid, &state, &start) ||
      start != h.start_time) {
    log().debug("rank {}: cannot watch rank {} (pid {}): not visible from here", options_.rank,
                peer, h.pid);
    return;
  }
  p.watch_pid = h.pid;
  p.watch_start = h.start_time;
  watching_ = true;
}

void UcxTransport::watch_peers_locked() {
  if (!watching_) return;
  auto now = Clock::now();
  if (now < next_watch_) return;
  next_watch_ = now + std::chrono::milliseconds(500);
  for (int peer = 0; peer < options_.size; ++peer) {
    Peer& p = peers_[peer];
    if (!p.watch_pid || p.gone || p.said_goodbye || p.failure) continue;
    char state = '?';
    uint64_t start = 0;
    bool alive = read_process(p.watch_pid, &state, &start) && start == p.watch_start &&
                 state != 'Z' && state != 'X';
    if (!alive)
      peer_died_locked(peer, fmt::format("its process (pid {}) ended without a goodbye to rank {}",
                                         p.watch_pid, options_.rank));
  }
  process_events_locked();  // settles the deaths found
}

// Messages nobody will receive (a failed job's leftovers) are received into
// nothing, so that UCX does not complain about them when the worker goes.
void UcxTransport::drain_unexpected_locked() {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
  param.cb.recv = [](void*, ucs_status_t, const ucp_tag_recv_info_t*, void*) {};
  for (int i = 0; i < 4096; ++i) {
    ucp_tag_recv_info_t info;
    ucp_tag_message_h message = ucp_tag_probe_nb(worker_, 0, 0, 1, &info);
    if (!message) break;
    ucs_status_ptr_t request = ucp_tag_msg_recv_nbx(worker_, nullptr, 0, message, &param);
    if (UCS_PTR_IS_PTR(request)) ucp_request_free(request);
  }
}

std::string UcxTransport::endpoint_info(int peer) {
  std::lock_guard lock(mu_);
  if (peer < 0 || peer >= options_.size || !peers_[peer].ep) return "(no endpoint)";
  char* text = nullptr;
  std::size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (!stream) return "(no memory)";
  ucp_ep_print_info(peers_[peer].ep, stream);
  fclose(stream);
  std::string out(text, length);
  free(text);
  return out;
}

// Fails what is left, closes the endpoints and hands everything back to UCX
// (bounded: what UCX still holds after 2 s goes with the worker).
void UcxTransport::teardown() noexcept {
  if (worker_) {
    std::unique_lock lock(mu_);
    tearing_down_ = true;
    auto error = std::make_exception_ptr(
        IoError(CHORUS_ERR_INVALID_USAGE,
                fmt::format("rank {}: the UCX transport was destroyed", options_.rank)));
    for (auto& p : peers_)
      for (auto& [raw, op] : p.ops)
        if (!op->drain && !op->control) fail_op(op.get(), error);
    if (control_req_) ucp_request_cancel(worker_, control_req_);
    process_events_locked();
    drain_unexpected_locked();
    // Without UCP_ERR_HANDLING_MODE_PEER a forced close is undefined for the
    // peer (UCX's documentation): flush instead (also waits for our sends).
    for (int peer = 0; peer < options_.size; ++peer) close_ep_locked(peer, peer_mode_);
    drive_until(
        lock, [&] { return closing_eps_.empty() && !recvs_in_ucx(-1); },
        Deadline::after(std::chrono::seconds(2)));
    for (auto& p : peers_) {
      for (auto& [raw, op] : p.ops) {
        if (op->lead) ucp_request_free(op->lead);
        if (op->bulk) ucp_request_free(op->bulk);
      }
      p.ops.clear();
      p.recv_order.clear();
    }
    for (void* r : closing_eps_) ucp_request_free(r);
    closing_eps_.clear();
    if (control_req_) ucp_request_free(control_req_);
    control_req_ = nullptr;
    events_.clear();
    notices_.clear();
    if (address_) ucp_worker_release_address(worker_, address_);
    ucp_worker_destroy(worker_);
    worker_ = nullptr;
  }
  if (context_) ucp_cleanup(context_);
  context_ = nullptr;
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
  wake_fd_ = stop_fd_ = -1;
}

bool UcxTransport::has_unmatched_arrival(int peer, uint32_t tag) {
  std::lock_guard lock(mu_);
  progress_locked();
  ucp_tag_recv_info_t info{};
  return ucp_tag_probe_nb(worker_, make_tag(TagKind::lead, peer, tag), kFullMask, 0, &info) !=
         nullptr;
}

}  // namespace chorus::ucx
