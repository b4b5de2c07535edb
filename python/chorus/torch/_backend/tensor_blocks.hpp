// What the backend's source files share about tensors (backend.cpp, the
// set-up and the reductions; backend_blocks.cpp, the collectives that move
// blocks between ranks): element counts, the flat staging of a list of
// blocks, and the tag that unequal alltoalls keep for themselves.
#pragma once

#include <ATen/ATen.h>

#include <chorus.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus::torch_backend {

// Alltoall with unequal splits runs as point-to-point messages on a tag of
// its own, above any tag a torch send/recv uses in practice.
inline constexpr int kAlltoallvTag = CHORUS_TAG_MAX;

inline size_t count_of(const at::Tensor& tensor) {
  return static_cast<size_t>(tensor.numel());
}

// Copies the blocks of a flat staging tensor (one per rank, rank order) into
// the caller's tensors, or the tensors into it.
inline void unpack(const at::Tensor& flat, std::vector<at::Tensor>& blocks) {
  int64_t offset = 0;
  for (auto& block : blocks) {
    block.copy_(flat.narrow(0, offset, block.numel()).view(block.sizes()));
    offset += block.numel();
  }
}

inline at::Tensor pack(const std::vector<at::Tensor>& blocks) {
  std::vector<at::Tensor> flat;
  flat.reserve(blocks.size());
  for (const auto& block : blocks) flat.push_back(block.reshape({-1}));
  return at::cat(flat);
}

}  // namespace chorus::torch_backend
