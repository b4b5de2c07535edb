// C++ API over the C API (header-only, so libchorus exports only chorus_*).
//
//   auto comm = chorus::Communicator::from_env();
//   comm.allreduce(std::span<const float>(in), std::span<float>(out), chorus::Op::sum);
//   chorus::Work w = comm.iallreduce_inplace(std::span<float>(grad), chorus::Op::avg);
//   w.wait();
//
// Errors throw chorus::Error carrying the chorus_result_t and the message of
// chorus_comm_last_error.
#pragma once

#include <chorus.h>
#include <chorus/error.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace chorus {

enum class Op {
  sum = CHORUS_SUM,
  prod = CHORUS_PROD,
  min = CHORUS_MIN,
  max = CHORUS_MAX,
  avg = CHORUS_AVG
};

// Compression on the wire of a float32 allreduce (chorus.h, chorus_allreduce_ex).
enum class Wire {
  configured = CHORUS_WIRE_DTYPE_DEFAULT,  // as CHORUS_WIRE_DTYPE says
  none = CHORUS_FLOAT32,                   // float32 on the wire
  bf16 = CHORUS_BFLOAT16,
  f16 = CHORUS_FLOAT16,
};
struct AllreduceOptions {
  Wire wire = Wire::configured;  // bf16 / f16 need float data (else an Error)

  chorus_allreduce_options_t c() const {
    chorus_allreduce_options_t o = CHORUS_ALLREDUCE_OPTIONS_INITIALIZER;
    o.wire_dtype = static_cast<chorus_dtype_t>(wire);
    return o;
  }
};

template <typename T>
constexpr chorus_dtype_t dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return CHORUS_FLOAT32;
  else if constexpr (std::is_same_v<T, double>)
    return CHORUS_FLOAT64;
  else if constexpr (std::is_same_v<T, int8_t>)
    return CHORUS_INT8;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return CHORUS_UINT8;
  else if constexpr (std::is_same_v<T, int32_t>)
    return CHORUS_INT32;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return CHORUS_UINT32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return CHORUS_INT64;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return CHORUS_UINT64;
  else
    static_assert(sizeof(T) == 0, "no Chorus dtype for this type (use the C API for f16/bf16)");
}

namespace detail {
inline void check(chorus_result_t r, chorus_comm_t comm) {
  if (r != CHORUS_SUCCESS)
    throw Error(r, std::string(chorus_result_string(r)) + ": " + chorus_comm_last_error(comm));
}
inline int64_t to_ms(std::chrono::milliseconds t) {
  return t.count();
}
}  // namespace detail

// A non-blocking collective in flight. Move-only; waits in its destructor if
// never waited on (buffers must outlive it).
class Work {
 public:
  Work() = default;
  // comm: the communicator the request was made on, whose
  // chorus_comm_last_error holds the message of a failed wait.
  Work(chorus_request_t r, chorus_comm_t comm) : request_(r), comm_(comm) {}
  explicit Work(chorus_request_t r) : request_(r) {}  // errors without their message
  Work(Work&& o) noexcept
      : request_(std::exchange(o.request_, nullptr)), comm_(std::exchange(o.comm_, nullptr)) {}
  Work& operator=(Work&& o) noexcept {
    if (this != &o) {
      finish_quietly();
      request_ = std::exchange(o.request_, nullptr);
      comm_ = std::exchange(o.comm_, nullptr);
    }
    return *this;
  }
  ~Work() { finish_quietly(); }

  // Waits (0 ms: CHORUS_TIMEOUT); throws on error or timeout.
  void wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    if (!request_) return;
    detail::check(chorus_wait(&request_, detail::to_ms(timeout)), comm_);
  }
  bool test() {
    if (!request_) return true;
    int done = 0;
    detail::check(chorus_test(&request_, &done), comm_);
    return done != 0;
  }

  friend void wait_all(std::span<Work> works, std::chrono::milliseconds timeout);

 private:
  void finish_quietly() noexcept {
    if (request_) chorus_wait(&request_, 0);
    request_ = nullptr;
  }
  chorus_request_t request_ = nullptr;
  chorus_comm_t comm_ = nullptr;
};

// Waits for every Work at once (chorus_wait_all: 0 ms, each its
// CHORUS_TIMEOUT; else one deadline for all). Throws the first failure in
// order, with its message; the Works that finished are done either way.
inline void wait_all(std::span<Work> works,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
  std::vector<chorus_request_t> requests;
  requests.reserve(works.size());
  for (const Work& w : works) requests.push_back(w.request_);
  std::vector<chorus_result_t> results(works.size(), CHORUS_SUCCESS);
  const chorus_result_t first =
      chorus_wait_all(requests.size(), requests.data(), detail::to_ms(timeout), results.data());
  for (std::size_t i = 0; i < works.size(); ++i) works[i].request_ = requests[i];
  if (first == CHORUS_SUCCESS) return;
  for (std::size_t i = 0; i < works.size(); ++i)
    if (results[i] != CHORUS_SUCCESS) detail::check(results[i], works[i].comm_);
  detail::check(first, nullptr);  // refused arguments
}

class Communicator {
 public:
  static Communicator from_env() {
    chorus_comm_t c = nullptr;
    detail::check(chorus_init_from_env(&c), nullptr);
    return Communicator(c);
  }
  static Communicator create(int rank, int world_size, const std::string& store_addr,
                             const std::string& job_token = "") {
    chorus_init_config_t config = CHORUS_INIT_CONFIG_INITIALIZER;
    config.rank = rank;
    config.world_size = world_size;
    config.store_addr = store_addr.c_str();
    config.job_token = job_token.c_str();
    chorus_comm_t c = nullptr;
    detail::check(chorus_init(&config, &c), nullptr);
    return Communicator(c);
  }

  Communicator(Communicator&& o) noexcept : comm_(std::exchange(o.comm_, nullptr)) {}
  Communicator& operator=(Communicator&& o) noexcept {
    if (this != &o) {
      chorus_comm_destroy(comm_);
      comm_ = std::exchange(o.comm_, nullptr);
    }
    return *this;
  }
  ~Communicator() { chorus_comm_destroy(comm_); }

  int rank() const {
    int r = -1;
    detail::check(chorus_comm_rank(comm_, &r), comm_);
    return r;
  }
  int size() const {
    int s = 0;
    detail::check(chorus_comm_size(comm_, &s), comm_);
    return s;
  }
  chorus_comm_t handle() const { return comm_; }
  void abort(const std::string& reason) { chorus_comm_abort(comm_, reason.c_str()); }

  template <typename T>
  void allreduce(std::span<const T> in, std::span<T> out, Op op,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    require(in.size() == out.size(), "allreduce: spans differ in size");
    detail::check(chorus_allreduce(comm_, in.data(), out.data(), in.size(), dtype_of<T>(),
                                   static_cast<chorus_op_t>(op), detail::to_ms(timeout)),
                  comm_);
  }
  template <typename T>
  void allreduce_inplace(std::span<T> data, Op op,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    detail::check(chorus_allreduce(comm_, data.data(), data.data(), data.size(), dtype_of<T>(),
                                   static_cast<chorus_op_t>(op), detail::to_ms(timeout)),
                  comm_);
  }
  template <typename T>
  Work iallreduce_inplace(std::span<T> data, Op op) {
    chorus_request_t r = nullptr;
    detail::check(chorus_iallreduce(comm_, data.data(), data.data(), data.size(), dtype_of<T>(),
                                    static_cast<chorus_op_t>(op), &r),
                  comm_);
    return Work(r, comm_);
  }
  // Hands a named tensor to the fusion engine (chorus_fused_allreduce) and
  // returns at once; the Work is its future. In place, or from in to out.
  template <typename T>
  Work fused_allreduce(const std::string& name, std::span<T> data, Op op) {
    chorus_request_t r = nullptr;
    detail::check(chorus_fused_allreduce(comm_, name.c_str(), data.data(), data.data(), data.size(),
                                         dtype_of<T>(), static_cast<chorus_op_t>(op), &r),
                  comm_);
    return Work(r, comm_);
  }
  template <typename T>
  Work fused_allreduce(const std::string& name, std::span<const T> in, std::span<T> out, Op op) {
    require(in.size() == out.size(), "fused_allreduce: spans differ in size");
    chorus_request_t r = nullptr;
    detail::check(chorus_fused_allreduce(comm_, name.c_str(), in.data(), out.data(), in.size(),
                                         dtype_of<T>(), static_cast<chorus_op_t>(op), &r),
                  comm_);
    return Work(r, comm_);
  }
  template <typename T>
  void allreduce(std::span<const T> in, std::span<T> out, Op op, const AllreduceOptions& options,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    require(in.size() == out.size(), "allreduce: spans differ in size");
    const chorus_allreduce_options_t o = options.c();
    detail::check(chorus_allreduce_ex(comm_, in.data(), out.data(), in.size(), dtype_of<T>(),
                                      static_cast<chorus_op_t>(op), &o, detail::to_ms(timeout)),
                  comm_);
  }
  template <typename T>
  void allreduce_inplace(std::span<T> data, Op op, const AllreduceOptions& options,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    const chorus_allreduce_options_t o = options.c();
    detail::check(chorus_allreduce_ex(comm_, data.data(), data.data(), data.size(), dtype_of<T>(),
                                      static_cast<chorus_op_t>(op), &o, detail::to_ms(timeout)),
                  comm_);
  }
  template <typename T>
  Work iallreduce_inplace(std::span<T> data, Op op, const AllreduceOptions& options) {
    chorus_request_t r = nullptr;
    const chorus_allreduce_options_t o = options.c();
    detail::check(chorus_iallreduce_ex(comm_, data.data(), data.data(), data.size(), dtype_of<T>(),
                                       static_cast<chorus_op_t>(op), &o, &r),
                  comm_);
    return Work(r, comm_);
  }
  template <typename T>
  void broadcast(std::span<T> data, int root,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    detail::check(chorus_broadcast(comm_, data.data(), data.size(), dtype_of<T>(), root,
                                   detail::to_ms(timeout)),
                  comm_);
  }
  template <typename T>
  void allgather(std::span<const T> in, std::span<T> out,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    require(out.size() == in.size() * static_cast<std::size_t>(size()),
            "allgather: output must hold size() * input elements");
    detail::check(chorus_allgather(comm_, in.data(), out.data(), in.size(), dtype_of<T>(),
                                   detail::to_ms(timeout)),
                  comm_);
  }
  template <typename T>
  void reduce_scatter(std::span<const T> in, std::span<T> out, Op op,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    require(in.size() == out.size() * static_cast<std::size_t>(size()),
            "reduce_scatter: input must hold size() * output elements");
    detail::check(chorus_reduce_scatter(comm_, in.data(), out.data(), out.size(), dtype_of<T>(),
                                        static_cast<chorus_op_t>(op), detail::to_ms(timeout)),
                  comm_);
  }
  void barrier(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    detail::check(chorus_barrier(comm_, detail::to_ms(timeout)), comm_);
  }
  // out (root only; ignored elsewhere) = the reduction of every rank's in.
  template <typename T>
  void reduce(std::span<const T> in, std::span<T> out, Op op, int root,
              std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    require(rank() != root || out.size() == in.size(), "reduce: spans differ in size at the root");
    detail::check(chorus_reduce(comm_, in.data(), out.data(), in.size(), dtype_of<T>(),
                                static_cast<chorus_op_t>(op), root, detail::to_ms(timeout)),
                  comm_);
  }
  // out (root only: size() * in.size() elements) = every rank's in, in rank order.
  template <typename T>
  void gather(std::span<const T> in, std::span<T> out, int root,
              std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    require(rank() != root || out.size() == in.size() * static_cast<std::size_t>(size()),
            "gather: the root's output must hold size() * input elements");
    detail::check(chorus_gather(comm_, in.data(), out.data(), in.size(), dtype_of<T>(), root,
                                detail::to_ms(timeout)),
                  comm_);
  }
  // Block r of the root's in (size() * out.size() elements) lands in rank r's out.
  template <typename T>
  void scatter(std::span<const T> in, std::span<T> out, int root,
               std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    require(rank() != root || in.size() == out.size() * static_cast<std::size_t>(size()),
            "scatter: the root's input must hold size() * output elements");
    detail::check(chorus_scatter(comm_, in.data(), out.data(), out.size(), dtype_of<T>(), root,
                                 detail::to_ms(timeout)),
                  comm_);
  }
  // Block j of in goes to rank j; out's block i comes from rank i.
  template <typename T>
  void alltoall(std::span<const T> in, std::span<T> out,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    require(in.size() == out.size() && in.size() % static_cast<std::size_t>(size()) == 0,
            "alltoall: spans must be equal and hold size() blocks");
    detail::check(chorus_alltoall(comm_, in.data(), out.data(), in.size() / size(), dtype_of<T>(),
                                  detail::to_ms(timeout)),
                  comm_);
  }
  // counts[r] elements from rank r, back to back in rank order.
  template <typename T>
  void allgatherv(std::span<const T> in, std::span<T> out, std::span<const std::size_t> counts,
                  std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    require(counts.size() == static_cast<std::size_t>(size()) &&
                in.size() == counts[static_cast<std::size_t>(rank())],
            "allgatherv: counts must have size() entries, this rank's being in.size()");
    detail::check(chorus_allgatherv(comm_, in.data(), out.data(), counts.data(), dtype_of<T>(),
                                    detail::to_ms(timeout)),
                  comm_);
  }
  template <typename T>
  void reduce_scatterv(std::span<const T> in, std::span<T> out, std::span<const std::size_t> counts,
                       Op op, std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    require(counts.size() == static_cast<std::size_t>(size()) &&
                out.size() == counts[static_cast<std::size_t>(rank())],
            "reduce_scatterv: counts must have size() entries, this rank's being out.size()");
    detail::check(chorus_reduce_scatterv(comm_, in.data(), out.data(), counts.data(), dtype_of<T>(),
                                         static_cast<chorus_op_t>(op), detail::to_ms(timeout)),
                  comm_);
  }
  // Point-to-point (tags 0..CHORUS_TAG_MAX; sizes must agree exactly).
  template <typename T>
  void send(std::span<const T> data, int peer, int tag,
            std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    detail::check(chorus_send(comm_, data.data(), data.size(), dtype_of<T>(), peer, tag,
                              detail::to_ms(timeout)),
                  comm_);
  }
  template <typename T>
  void recv(std::span<T> data, int peer, int tag,
            std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
    detail::check(chorus_recv(comm_, data.data(), data.size(), dtype_of<T>(), peer, tag,
                              detail::to_ms(timeout)),
                  comm_);
  }
  template <typename T>
  Work isend(std::span<const T> data, int peer, int tag) {
    chorus_request_t r = nullptr;
    detail::check(chorus_isend(comm_, data.data(), data.size(), dtype_of<T>(), peer, tag, &r),
                  comm_);
    return Work(r, comm_);
  }
  template <typename T>
  Work irecv(std::span<T> data, int peer, int tag) {
    chorus_request_t r = nullptr;
    detail::check(chorus_irecv(comm_, data.data(), data.size(), dtype_of<T>(), peer, tag, &r),
                  comm_);
    return Work(r, comm_);
  }
  // Ranks with the same color form a new communicator ordered by (key, rank);
  // std::nullopt for a rank passing CHORUS_UNDEFINED.
  std::optional<Communicator> split(int color, int key) {
    chorus_comm_t c = nullptr;
    detail::check(chorus_comm_split(comm_, color, key, &c), comm_);
    if (!c) return std::nullopt;
    return Communicator(c);
  }

 private:
  explicit Communicator(chorus_comm_t c) : comm_(c) {}
  // A refused call fails the communicator on every rank, as the C API's own
  // refusals do: the peers may already wait in the call.
  void require(bool ok, const char* message) {
    if (ok) return;
    detail::check(chorus_comm_fail(comm_, CHORUS_ERR_INVALID_ARGUMENT, message), comm_);
    throw Error(CHORUS_ERR_INVALID_ARGUMENT, chorus_comm_last_error(comm_));
  }
  chorus_comm_t comm_ = nullptr;
};

}  // namespace chorus
