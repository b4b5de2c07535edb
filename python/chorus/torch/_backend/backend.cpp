// The torch.distributed backend's set-up (one chorus communicator per
// process group), its waiter thread, the argument checks, and the
// reductions, broadcast, point-to-point and barrier. The collectives that
// move blocks between ranks: backend_blocks.cpp.
#include "backend.hpp"
#include "tensor_blocks.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>

namespace chorus::torch_backend {
namespace {

std::exception_ptr dist_backend_error(const std::string& message) {
  try {
    C10_THROW_ERROR(DistBackendError, message);
  } catch (...) {
    return std::current_exception();
  }
}

// A token shared by the group's ranks and no other group or job: rank 0 draws
// it and the others read it from the group's store. Chorus names the group's
// shared-memory segments after it.
std::string group_token(const c10::intrusive_ptr<c10d::Store>& store, int rank) {
  const std::string key = "chorus/token";
  if (rank == 0) {
    std::random_device entropy;
    std::ostringstream token;
    token << "torch-" << std::hex << entropy() << entropy() << entropy();
    const std::string text = token.str();
    store->set(key, std::vector<uint8_t>(text.begin(), text.end()));
    return text;
  }
  std::vector<uint8_t> value = store->get(key);
  return std::string(value.begin(), value.end());
}

}  // namespace

// --- ChorusWork --------------------------------------------------------------

ChorusWork::ChorusWork(int rank, c10d::OpType type, const char* profiling_title,
                       std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type, profiling_title),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

void ChorusWork::complete(const std::string& error) {
  keep_alive_.clear();
  if (error.empty()) {
    // The future first: DDP's comm hooks chain on it; wait() returns after both.
    future_->markCompleted(c10::IValue(outputs_));
    finish();
  } else {
    auto exception = dist_backend_error(error);
    future_->setError(exception);
    finish(exception);
  }
}

// --- ChorusBackend: set-up and the waiter --------------------------------------

ChorusBackend::ChorusBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                             std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), timeout_(timeout) {
  const std::string token = group_token(store, rank);
  const std::string network = shared_network_address(store);
  chorus_init_config_t config = CHORUS_INIT_CONFIG_INITIALIZER;
  config.rank = rank;
  config.world_size = size;
  config.job_token = token.c_str();
  config.store_addr = network.empty() ? nullptr : network.c_str();
  chorus_store_ops_t ops = store_ops_for(store);
  chorus_result_t result = chorus_init_with_store(&config, &ops, &comm_);
  if (result != CHORUS_SUCCESS)
    C10_THROW_ERROR(DistBackendError,
                    std::string("chorus: rank ") + std::to_string(rank) + " of " +
                        std::to_string(size) + " could not join its process group (" +
                        chorus_result_string(result) + "): " + chorus_comm_last_error(nullptr));
  waiter_ = std::thread([this] { wait_loop(); });
}

ChorusBackend::~ChorusBackend() {
  stop_waiter();
  // Collective, bounded by CHORUS_TIMEOUT: waits for outstanding work and says goodbye.
  if (comm_) chorus_comm_destroy(comm_);
}

c10::intrusive_ptr<c10d::Backend> ChorusBackend::create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    const std::chrono::duration<float>& timeout) {
  return c10::make_intrusive<ChorusBackend>(
      store, rank, size, std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
}

void ChorusBackend::abort() {
  if (comm_) chorus_comm_abort(comm_, "the torch process group was aborted");
  stop_waiter();
}

void ChorusBackend::shutdown() {
  stop_waiter();
}

void ChorusBackend::stop_waiter() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  queued_.notify_all();
  if (waiter_.joinable()) waiter_.join();
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::enqueue(c10::intrusive_ptr<ChorusWork> work) {
  ++sequence_;
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      work->complete("chorus: the process group was shut down");
      return work;
    }
    pending_.push_back(work);
  }
  queued_.notify_one();
  return work;
}

// Chorus runs a communicator's operations in the order they were issued, so
// waiting the works in that order completes each as soon as it can.
void ChorusBackend::wait_loop() {
  for (;;) {
    c10::intrusive_ptr<ChorusWork> work;
    {
      std::unique_lock lock(mu_);
      queued_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, nothing left
      work = pending_.front();
      pending_.pop_front();
    }
    std::string error;
    for (auto& request : work->requests_) {
      chorus_result_t result = chorus_wait(&request, timeout_.count());
      if (result == CHORUS_ERR_TIMEOUT && request) {
        // The process group's timeout passed first: fail the communicator
        // (the peers learn of it) and collect the request's own verdict.
        const std::string reason = "the operation exceeded the process group's timeout of " +
                                   std::to_string(timeout_.count()) + " ms";
        chorus_comm_abort(comm_, reason.c_str());
        result = chorus_wait(&request, 0);
      }
      if (result != CHORUS_SUCCESS && error.empty())
        error = std::string("chorus: ") + chorus_result_string(result) + ": " +
                chorus_comm_last_error(comm_);
    }
    if (error.empty() && work->finish_up_) {
      try {
        work->finish_up_();
      } catch (const std::exception& e) {
        error = std::string("chorus: copying the result out failed: ") + e.what();
      }
    }
    work->complete(error);
  }
}

// --- argument checks -------------------------------------------------------------

void ChorusBackend::refuse(const std::string& what) {
  const std::string message = "chorus backend, rank " + std::to_string(rank_) + ": " + what;
  if (comm_) chorus_comm_fail(comm_, CHORUS_ERR_INVALID_ARGUMENT, message.c_str());
  C10_THROW_ERROR(ValueError, message);
}

void ChorusBackend::check(chorus_result_t result, const char* call) {
  if (result == CHORUS_SUCCESS) return;
  C10_THROW_ERROR(DistBackendError, std::string("chorus: ") + call + " failed (" +
                                        chorus_result_string(result) +
                                        "): " + chorus_comm_last_error(comm_));
}

chorus_dtype_t ChorusBackend::dtype_of(const at::Tensor& tensor, const char* call) {
  switch (tensor.scalar_type()) {
    case at::kFloat:
      return CHORUS_FLOAT32;
    case at::kDouble:
      return CHORUS_FLOAT64;
    case at::kHalf:
      return CHORUS_FLOAT16;
    case at::kBFloat16:
      return CHORUS_BFLOAT16;
    case at::kChar:
      return CHORUS_INT8;
    case at::kByte:
      return CHORUS_UINT8;
    case at::kInt:
      return CHORUS_INT32;
    case at::kUInt32:
      return CHORUS_UINT32;
    case at::kLong:
      return CHORUS_INT64;
    case at::kUInt64:
      return CHORUS_UINT64;
    // Moved as bytes (no arithmetic): bool as uint8, which MIN/MAX reduce as AND/OR.
    case at::kBool:
      return CHORUS_UINT8;
    default:
      refuse(std::string(call) + ": dtype " + std::string(c10::toString(tensor.scalar_type())) +
             " is not one Chorus has (float32/64, float16, bfloat16, int8/32/64, uint8/32/64, "
             "bool)");
  }
}

chorus_op_t ChorusBackend::op_of(const c10d::ReduceOp& op, const char* call) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return CHORUS_SUM;
    case c10d::ReduceOp::PRODUCT:
      return CHORUS_PROD;
    case c10d::ReduceOp::MIN:
      return CHORUS_MIN;
    case c10d::ReduceOp::MAX:
      return CHORUS_MAX;
    case c10d::ReduceOp::AVG:
      return CHORUS_AVG;
    default:
      refuse(std::string(call) + ": reduce op " + std::to_string(static_cast<int>(op.op_)) +
             " is not supported (SUM, PRODUCT, MIN, MAX, AVG; not BAND/BOR/BXOR/PREMUL_SUM)");
  }
}

void ChorusBackend::check_tensor(const at::Tensor& tensor, const char* call) {
  if (!tensor.device().is_cpu())
    refuse(std::string(call) + ": tensor on " + tensor.device().str() +
           "; chorus takes CPU tensors");
  if (!tensor.is_contiguous()) refuse(std::string(call) + ": tensor is not contiguous");
  if (tensor.is_sparse()) refuse(std::string(call) + ": sparse tensors are not supported");
}

// --- collectives -------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ChorusBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::AllreduceOptions& opts) {
  auto work =
      c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::ALLREDUCE, "chorus:allreduce", tensors);
  const chorus_op_t op = op_of(opts.reduceOp, "allreduce");
  for (auto& tensor : tensors) {
    check_tensor(tensor, "allreduce");
    if (tensor.scalar_type() == at::kBool && op != CHORUS_MIN && op != CHORUS_MAX)
      refuse("allreduce: bool tensors reduce with MIN or MAX only");
    chorus_request_t request = nullptr;
    check(chorus_iallreduce(comm_, tensor.data_ptr(), tensor.data_ptr(), count_of(tensor),
                            dtype_of(tensor, "allreduce"), op, &request),
          "allreduce");
    work->requests_.push_back(request);
  }
  return enqueue(work);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  return allreduce(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                        const c10d::BroadcastOptions& opts) {
  auto work =
      c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::BROADCAST, "chorus:broadcast", tensors);
  for (auto& tensor : tensors) {
    check_tensor(tensor, "broadcast");
    chorus_request_t request = nullptr;
    check(
        chorus_ibroadcast(comm_, tensor.data_ptr(), count_of(tensor), dtype_of(tensor, "broadcast"),
                          static_cast<int>(opts.rootRank), &request),
        "broadcast");
    work->requests_.push_back(request);
  }
  return enqueue(work);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::reduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::ReduceOptions& opts) {
  auto work =
      c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::REDUCE, "chorus:reduce", tensors);
  const chorus_op_t op = op_of(opts.reduceOp, "reduce");
  const bool root = opts.rootRank == rank_;
  for (auto& tensor : tensors) {
    check_tensor(tensor, "reduce");
    chorus_request_t request = nullptr;
    check(chorus_ireduce(comm_, tensor.data_ptr(), root ? tensor.data_ptr() : nullptr,
                         count_of(tensor), dtype_of(tensor, "reduce"), op,
                         static_cast<int>(opts.rootRank), &request),
          "reduce");
    work->requests_.push_back(request);
  }
  return enqueue(work);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                   int tag) {
  if (tag < 0 || tag >= kAlltoallvTag)
    refuse("send: tag " + std::to_string(tag) + " outside 0.." + std::to_string(kAlltoallvTag - 1));
  auto work = c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::SEND, "chorus:send", tensors);
  for (auto& tensor : tensors) {
    check_tensor(tensor, "send");
    chorus_request_t request = nullptr;
    check(chorus_isend(comm_, tensor.data_ptr(), count_of(tensor), dtype_of(tensor, "send"),
                       dst_rank, tag, &request),
          "send");
    work->requests_.push_back(request);
  }
  return enqueue(work);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                   int tag) {
  if (tag < 0 || tag >= kAlltoallvTag)
    refuse("recv: tag " + std::to_string(tag) + " outside 0.." + std::to_string(kAlltoallvTag - 1));
  auto work = c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::RECV, "chorus:recv", tensors);
  for (auto& tensor : tensors) {
    check_tensor(tensor, "recv");
    chorus_request_t request = nullptr;
    check(chorus_irecv(comm_, tensor.data_ptr(), count_of(tensor), dtype_of(tensor, "recv"),
                       src_rank, tag, &request),
          "recv");
    work->requests_.push_back(request);
  }
  return enqueue(work);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::barrier(const c10d::BarrierOptions&) {
  auto work = c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::BARRIER, "chorus:barrier",
                                              std::vector<at::Tensor>{});
  chorus_request_t request = nullptr;
  check(chorus_ibarrier(comm_, &request), "barrier");
  work->requests_.push_back(request);
  return enqueue(work);
}

}  // namespace chorus::torch_backend
