#include "collectives/scattered.hpp"

#include "base/core/error.hpp"

namespace chorus {

void ScatteredBuffers::clear() {
  parts_.clear();
  starts_.clear();
  total_ = 0;
  in_place_ = true;
}

void ScatteredBuffers::add(const void* send, void* recv, std::size_t bytes) {
  if (bytes == 0) return;
  parts_.push_back({static_cast<const std::byte*>(send), static_cast<std::byte*>(recv), bytes});
  starts_.push_back(total_);
  total_ += bytes;
  in_place_ = in_place_ && send == recv;
}

std::size_t ScatteredBuffers::part_at(std::size_t offset) const {
  CHORUS_CHECK(offset < total_, "byte {} of a scattered call of {} bytes in {} parts", offset,
               total_, parts_.size());
  // The last part that starts at or before the offset.
  return static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), offset) -
                                  starts_.begin()) -
         1;
}

ScatteredBuffers::Part ScatteredBuffers::within(std::size_t offset, std::size_t length) const {
  if (length == 0) return {};
  const std::size_t i = part_at(offset);
  const std::size_t into = offset - starts_[i];
  const Part& p = parts_[i];
  if (into + length > p.bytes) return {};
  return {p.send + into, p.recv + into, length};
}

}  // namespace chorus
