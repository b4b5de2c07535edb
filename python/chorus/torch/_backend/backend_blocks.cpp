// The torch.distributed collectives that move blocks between ranks
// (allgather, gather, scatter, reduce_scatter, alltoall and their
// coalesced and tensor forms): chorus's calls on the tensors where they lie
// when they are one flat buffer, else on a flat staging tensor copied in or
// out (finish_up). The set-up, the waiter and the reductions: backend.cpp.
#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend.hpp"
#include "tensor_blocks.hpp"

namespace chorus::torch_backend {

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

}  // namespace chorus::torch_backend
