#include "backend.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>

namespace chorus::torch_backend {
namespace {

// Alltoall with unequal splits runs as point-to-point messages on a tag of
// its own, above any tag a torch send/recv uses in practice.
constexpr int kAlltoallvTag = CHORUS_TAG_MAX;

std::exception_ptr dist_backend_error(const std::string& message) {
  try {
    C10_THROW_ERROR(DistBackendError, message);
  } catch (...) {
    return std::current_exception();
  }
}

size_t count_of(const at::Tensor& tensor) {
  return static_cast<size_t>(tensor.numel());
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

// Copies the blocks of a flat staging tensor (one per rank, rank order) into
// the caller's tensors, or the tensors into it.
void unpack(const at::Tensor& flat, std::vector<at::Tensor>& blocks) {
  int64_t offset = 0;
  for (auto& block : blocks) {
    block.copy_(flat.narrow(0, offset, block.numel()).view(block.sizes()));
    offset += block.numel();
  }
}

at::Tensor pack(const std::vector<at::Tensor>& blocks) {
  std::vector<at::Tensor> flat;
  flat.reserve(blocks.size());
  for (const auto& block : blocks) flat.push_back(block.reshape({-1}));
  return at::cat(flat);
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

c10::intrusive_ptr<c10d::Work> ChorusBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                              const c10d::AllgatherOptions&) {
  check_tensor(output, "allgather_into_tensor");
  check_tensor(input, "allgather_into_tensor");
  if (output.numel() != input.numel() * size_ || output.scalar_type() != input.scalar_type())
    refuse("allgather_into_tensor: the output must hold world_size times the input, same dtype");
  auto work = c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::_ALLGATHER_BASE,
                                              "chorus:all_gather_into_tensor",
                                              std::vector<at::Tensor>{output});
  work->keep_alive_ = {input};
  chorus_request_t request = nullptr;
  check(chorus_iallgather(comm_, input.data_ptr(), output.data_ptr(), count_of(input),
                          dtype_of(input, "allgather_into_tensor"), &request),
        "allgather_into_tensor");
  work->requests_.push_back(request);
  return enqueue(work);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  if (outputs.size() != inputs.size())
    refuse("allgather_into_tensor_coalesced: as many outputs as inputs are needed");
  auto work = c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::COALESCED,
                                              "chorus:all_gather_into_tensor_coalesced", outputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor(outputs[i], "allgather_into_tensor_coalesced");
    check_tensor(inputs[i], "allgather_into_tensor_coalesced");
    if (outputs[i].numel() != inputs[i].numel() * size_ ||
        outputs[i].scalar_type() != inputs[i].scalar_type())
      refuse("allgather_into_tensor_coalesced: each output must hold world_size times its input");
    work->keep_alive_.push_back(inputs[i]);
    chorus_request_t request = nullptr;
    check(chorus_iallgather(comm_, inputs[i].data_ptr(), outputs[i].data_ptr(), count_of(inputs[i]),
                            dtype_of(inputs[i], "allgather"), &request),
          "allgather");
    work->requests_.push_back(request);
  }
  return enqueue(work);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  return allgather_per_input(outputs, inputs);
}

// torch passes output_lists[rank][input] here (all_gather_coalesced), where
// allgather has outputs[input][rank]: the same tensors, the other way round.
c10::intrusive_ptr<c10d::Work> ChorusBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  if (output_lists.size() != static_cast<size_t>(size_))
    refuse("all_gather_coalesced: one output list per rank is needed");
  std::vector<std::vector<at::Tensor>> per_input(inputs.size());
  for (const auto& list : output_lists) {
    if (list.size() != inputs.size())
      refuse("all_gather_coalesced: each rank's output list must hold one tensor per input");
    for (size_t i = 0; i < inputs.size(); ++i) per_input[i].push_back(list[i]);
  }
  return allgather_per_input(per_input, inputs);
}

// Each input gathers into a flat staging tensor, copied out to its list
// (output_lists[input][rank]) afterwards.
c10::intrusive_ptr<c10d::Work> ChorusBackend::allgather_per_input(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs) {
  if (output_lists.size() != inputs.size())
    refuse("allgather: one output list per input is needed");
  std::vector<at::Tensor> all_outputs;
  for (const auto& list : output_lists)
    all_outputs.insert(all_outputs.end(), list.begin(), list.end());
  auto work = c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::ALLGATHER, "chorus:all_gather",
                                              all_outputs);
  std::vector<at::Tensor> staging;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor(inputs[i], "allgather");
    if (output_lists[i].size() != static_cast<size_t>(size_))
      refuse("allgather: each output list must hold world_size tensors");
    for (const auto& out : output_lists[i])
      if (out.numel() != inputs[i].numel() || out.scalar_type() != inputs[i].scalar_type())
        refuse("allgather: every output tensor must match the input's size and dtype");
    at::Tensor flat = at::empty({inputs[i].numel() * size_}, inputs[i].options());
    staging.push_back(flat);
    work->keep_alive_.push_back(inputs[i]);
    chorus_request_t request = nullptr;
    check(chorus_iallgather(comm_, inputs[i].data_ptr(), flat.data_ptr(), count_of(inputs[i]),
                            dtype_of(inputs[i], "allgather"), &request),
          "allgather");
    work->requests_.push_back(request);
  }
  work->keep_alive_.insert(work->keep_alive_.end(), staging.begin(), staging.end());
  work->finish_up_ = [staging, output_lists]() mutable {
    for (size_t i = 0; i < staging.size(); ++i) unpack(staging[i], output_lists[i]);
  };
  return enqueue(work);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::GatherOptions& opts) {
  if (inputs.size() != 1) refuse("gather: one input tensor per rank");
  at::Tensor input = inputs[0];
  check_tensor(input, "gather");
  const int root = static_cast<int>(opts.rootRank);
  const bool at_root = root == rank_;
  std::vector<at::Tensor> results;
  at::Tensor flat;
  if (at_root) {
    if (outputs.size() != 1 || outputs[0].size() != static_cast<size_t>(size_))
      refuse("gather: the root needs one output list of world_size tensors");
    for (const auto& out : outputs[0])
      if (out.numel() != input.numel() || out.scalar_type() != input.scalar_type())
        refuse("gather: every output tensor must match the input's size and dtype");
    results = outputs[0];
    flat = at::empty({input.numel() * size_}, input.options());
  }
  auto work =
      c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::GATHER, "chorus:gather", results);
  work->keep_alive_ = {input};
  if (at_root) work->keep_alive_.push_back(flat);
  chorus_request_t request = nullptr;
  check(chorus_igather(comm_, input.data_ptr(), at_root ? flat.data_ptr() : nullptr,
                       count_of(input), dtype_of(input, "gather"), root, &request),
        "gather");
  work->requests_.push_back(request);
  if (at_root) work->finish_up_ = [flat, results]() mutable { unpack(flat, results); };
  return enqueue(work);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::scatter(std::vector<at::Tensor>& outputs,
                                                      std::vector<std::vector<at::Tensor>>& inputs,
                                                      const c10d::ScatterOptions& opts) {
  if (outputs.size() != 1) refuse("scatter: one output tensor per rank");
  at::Tensor output = outputs[0];
  check_tensor(output, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  const bool at_root = root == rank_;
  at::Tensor flat;
  if (at_root) {
    if (inputs.size() != 1 || inputs[0].size() != static_cast<size_t>(size_))
      refuse("scatter: the root needs one input list of world_size tensors");
    for (const auto& in : inputs[0])
      if (in.numel() != output.numel() || in.scalar_type() != output.scalar_type())
        refuse("scatter: every input tensor must match the output's size and dtype");
    flat = pack(inputs[0]);
  }
  auto work =
      c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::SCATTER, "chorus:scatter", outputs);
  if (at_root) work->keep_alive_ = {flat};
  chorus_request_t request = nullptr;
  check(chorus_iscatter(comm_, at_root ? flat.data_ptr() : nullptr, output.data_ptr(),
                        count_of(output), dtype_of(output, "scatter"), root, &request),
        "scatter");
  work->requests_.push_back(request);
  return enqueue(work);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  check_tensor(output, "reduce_scatter_tensor");
  check_tensor(input, "reduce_scatter_tensor");
  if (input.numel() != output.numel() * size_ || output.scalar_type() != input.scalar_type())
    refuse("reduce_scatter_tensor: the input must hold world_size times the output, same dtype");
  const chorus_op_t op = op_of(opts.reduceOp, "reduce_scatter_tensor");
  auto work = c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::_REDUCE_SCATTER_BASE,
                                              "chorus:reduce_scatter_tensor",
                                              std::vector<at::Tensor>{output});
  work->keep_alive_ = {input};
  chorus_request_t request = nullptr;
  check(chorus_ireduce_scatter(comm_, input.data_ptr(), output.data_ptr(), count_of(output),
                               dtype_of(output, "reduce_scatter_tensor"), op, &request),
        "reduce_scatter_tensor");
  work->requests_.push_back(request);
  return enqueue(work);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  if (outputs.size() != inputs.size())
    refuse("reduce_scatter_tensor_coalesced: as many outputs as inputs are needed");
  const chorus_op_t op = op_of(opts.reduceOp, "reduce_scatter_tensor_coalesced");
  auto work = c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::COALESCED,
                                              "chorus:reduce_scatter_tensor_coalesced", outputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor(outputs[i], "reduce_scatter_tensor_coalesced");
    check_tensor(inputs[i], "reduce_scatter_tensor_coalesced");
    if (inputs[i].numel() != outputs[i].numel() * size_ ||
        outputs[i].scalar_type() != inputs[i].scalar_type())
      refuse("reduce_scatter_tensor_coalesced: each input must hold world_size times its output");
    work->keep_alive_.push_back(inputs[i]);
    chorus_request_t request = nullptr;
    check(chorus_ireduce_scatter(comm_, inputs[i].data_ptr(), outputs[i].data_ptr(),
                                 count_of(outputs[i]), dtype_of(outputs[i], "reduce_scatter"), op,
                                 &request),
          "reduce_scatter");
    work->requests_.push_back(request);
  }
  return enqueue(work);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  if (outputs.size() != 1 || inputs.size() != 1 || inputs[0].size() != static_cast<size_t>(size_))
    refuse("reduce_scatter: one output and one list of world_size inputs");
  at::Tensor output = outputs[0];
  for (const auto& in : inputs[0]) {
    check_tensor(in, "reduce_scatter");
    if (in.numel() != output.numel() || in.scalar_type() != output.scalar_type())
      refuse("reduce_scatter: every input tensor must match the output's size and dtype");
  }
  at::Tensor flat = pack(inputs[0]);
  return _reduce_scatter_base(output, flat, opts);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions&) {
  check_tensor(output, "alltoall_base");
  check_tensor(input, "alltoall_base");
  if (output.scalar_type() != input.scalar_type())
    refuse("alltoall_base: input and output dtypes differ");
  const chorus_dtype_t dtype = dtype_of(input, "alltoall_base");
  auto work = c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::ALLTOALL_BASE,
                                              "chorus:all_to_all", std::vector<at::Tensor>{output});
  work->keep_alive_ = {input};
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    if (input.numel() != output.numel() || input.numel() % size_ != 0)
      refuse(
          "alltoall_base: equal splits need input and output of one size, divisible by "
          "world_size");
    chorus_request_t request = nullptr;
    check(chorus_ialltoall(comm_, input.data_ptr(), output.data_ptr(), count_of(input) / size_,
                           dtype, &request),
          "alltoall");
    work->requests_.push_back(request);
    return enqueue(work);
  }
  // Unequal splits (rows of dim 0): a message to and from every other rank,
  // this rank's own block copied.
  auto splits = [&](const std::vector<int64_t>& given, const at::Tensor& tensor) {
    if (!given.empty()) {
      if (given.size() != static_cast<size_t>(size_))
        refuse("alltoall_base: world_size splits needed");
      return given;
    }
    if (tensor.dim() == 0 || tensor.size(0) % size_ != 0)
      refuse("alltoall_base: dim 0 does not divide into world_size equal splits");
    return std::vector<int64_t>(static_cast<size_t>(size_), tensor.size(0) / size_);
  };
  const std::vector<int64_t> in_splits = splits(input_split_sizes, input);
  const std::vector<int64_t> out_splits = splits(output_split_sizes, output);
  const int64_t in_row = input.dim() == 0 ? 1 : input.numel() / std::max<int64_t>(input.size(0), 1);
  const int64_t out_row =
      output.dim() == 0 ? 1 : output.numel() / std::max<int64_t>(output.size(0), 1);
  const size_t element = input.element_size();
  auto* in_bytes = static_cast<char*>(input.data_ptr());
  auto* out_bytes = static_cast<char*>(output.data_ptr());
  int64_t in_offset = 0, out_offset = 0;
  for (int peer = 0; peer < size_; ++peer) {
    const int64_t in_count = in_splits[peer] * in_row, out_count = out_splits[peer] * out_row;
    if (peer == rank_) {
      if (in_count != out_count) refuse("alltoall_base: this rank's own split differs in and out");
      std::memcpy(out_bytes + out_offset * element, in_bytes + in_offset * element,
                  static_cast<size_t>(in_count) * element);
    } else {
      // A split of zero sends nothing; the peer's matching split is zero too.
      if (in_count > 0) {
        chorus_request_t request = nullptr;
        check(chorus_isend(comm_, in_bytes + in_offset * element, static_cast<size_t>(in_count),
                           dtype, peer, kAlltoallvTag, &request),
              "alltoall (send)");
        work->requests_.push_back(request);
      }
      if (out_count > 0) {
        chorus_request_t request = nullptr;
        check(chorus_irecv(comm_, out_bytes + out_offset * element, static_cast<size_t>(out_count),
                           dtype, peer, kAlltoallvTag, &request),
              "alltoall (recv)");
        work->requests_.push_back(request);
      }
    }
    in_offset += in_count;
    out_offset += out_count;
  }
  return enqueue(work);
}

c10::intrusive_ptr<c10d::Work> ChorusBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllToAllOptions&) {
  if (outputs.size() != static_cast<size_t>(size_) || inputs.size() != static_cast<size_t>(size_))
    refuse("alltoall: world_size input and output tensors needed");
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor(inputs[i], "alltoall");
    if (inputs[i].numel() != inputs[0].numel() || outputs[i].numel() != inputs[0].numel() ||
        inputs[i].scalar_type() != inputs[0].scalar_type() ||
        outputs[i].scalar_type() != inputs[0].scalar_type())
      refuse("alltoall: tensors of unequal sizes or dtypes (chorus takes equal blocks)");
  }
  at::Tensor flat_in = pack(inputs);
  at::Tensor flat_out = at::empty_like(flat_in);
  auto work =
      c10::make_intrusive<ChorusWork>(rank_, c10d::OpType::ALLTOALL, "chorus:all_to_all", outputs);
  work->keep_alive_ = {flat_in, flat_out};
  chorus_request_t request = nullptr;
  check(chorus_ialltoall(comm_, flat_in.data_ptr(), flat_out.data_ptr(), count_of(inputs[0]),
                         dtype_of(inputs[0], "alltoall"), &request),
        "alltoall");
  work->requests_.push_back(request);
  work->finish_up_ = [flat_out, outputs]() mutable { unpack(flat_out, outputs); };
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
