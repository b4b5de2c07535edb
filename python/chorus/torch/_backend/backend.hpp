// Chorus as a torch.distributed backend: one chorus communicator per process
// group, built over that group's c10d::Store (chorus_init_with_store), and a
// c10d::Work per call whose requests a waiter thread completes in order.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <chorus.h>

namespace chorus::torch_backend {

// The c10d::Store of a process group as chorus_store_ops_t (store_ops.cpp).
// The ops own a reference to the store; their release drops it.
chorus_store_ops_t store_ops_for(const c10::intrusive_ptr<c10d::Store>& store);
// "host:port" of the TCPStore under the group's PrefixStores ("" when it is
// another kind): the network the ranks share, where chorus listens.
std::string shared_network_address(const c10::intrusive_ptr<c10d::Store>& store);

// One call's chorus requests. The waiter thread waits them, runs `finish_up`
// (copies out of staging buffers) and completes the Work and its future with
// `outputs` or with chorus's error.
class ChorusWork : public c10d::Work {
 public:
  ChorusWork(int rank, c10d::OpType type, const char* profiling_title,
             std::vector<at::Tensor> outputs);

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  friend class ChorusBackend;
  // Called once, on the waiter thread: error "" is success.
  void complete(const std::string& error);

  std::vector<at::Tensor> outputs_;
  std::vector<chorus_request_t> requests_;
  std::function<void()> finish_up_;
  // Keeps inputs and staging buffers alive until chorus is done with them.
  std::vector<at::Tensor> keep_alive_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ChorusBackend : public c10d::Backend {
 public:
  ChorusBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                std::chrono::milliseconds timeout);
  ~ChorusBackend() override;

  // torch's creator: Backend.register_backend("chorus", create, devices=["cpu"]).
  static c10::intrusive_ptr<c10d::Backend> create(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  const std::chrono::duration<float>& timeout);

  const std::string getBackendName() const override { return "chorus"; }
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  void abort() override;
  void shutdown() override;
  // The group's count of operations issued, which torch's debug wrapper
  // (TORCH_DISTRIBUTED_DEBUG=DETAIL) compares across ranks: it starts at 0
  // and every collective, send and receive counts one (enqueue).
  void setSequenceNumberForGroup() override { sequence_ = 0; }
  uint64_t getSequenceNumberForGroup() override { return sequence_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // A refusal (an argument torch allows but Chorus cannot take) fails the
  // communicator here and at the peers, which may already wait in this call,
  // then throws c10::Error with the text.
  [[noreturn]] void refuse(const std::string& what);
  // Throws (and fails the communicator) when a chorus call returned an error.
  void check(chorus_result_t result, const char* call);
  chorus_dtype_t dtype_of(const at::Tensor& tensor, const char* call);
  chorus_op_t op_of(const c10d::ReduceOp& op, const char* call);
  void check_tensor(const at::Tensor& tensor, const char* call);
  // Hands a work with its requests to the waiter thread.
  c10::intrusive_ptr<c10d::Work> enqueue(c10::intrusive_ptr<ChorusWork> work);
  // allgather's layout: output_lists[input][rank].
  c10::intrusive_ptr<c10d::Work> allgather_per_input(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs);
  void wait_loop();
  void stop_waiter();

  chorus_comm_t comm_ = nullptr;
  std::chrono::milliseconds timeout_;
  std::atomic<uint64_t> sequence_{0};

  std::mutex mu_;
  std::condition_variable queued_;
  std::deque<c10::intrusive_ptr<ChorusWork>> pending_;
  bool stopping_ = false;
  std::thread waiter_;
};

}  // namespace chorus::torch_backend
