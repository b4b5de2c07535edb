// A POSIX shared-memory segment (shm_open + mmap) that one rank creates and the
// others of the same host open by name.
//
// Lifetime: the creator unlinks the name as soon as every rank has mapped it
// (Domain does this during set-up), so a segment never outlives the job's
// processes, however they exit. Should the creator die inside that short
// window, chorusrun removes /dev/shm/<prefix>* for the job token when the job
// ends (segment_name_prefix gives the prefix).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::shm {

// "chorus-<token>-" (token reduced to [A-Za-z0-9_]; "notoken" when empty).
// The names of every segment a job creates start with it.
std::string segment_name_prefix(std::string_view job_token);

// Unlinks every segment in /dev/shm whose name starts with prefix; returns
// their names. For launchers, once all ranks of a job are gone.
std::vector<std::string> remove_segments(const std::string& prefix);

class Segment {
 public:
  // Creates a new segment of `bytes` (zero-filled, pages touched once).
  // Throws IoError if the name exists or memory is short.
  static Segment create(const std::string& name, std::size_t bytes);
  // Maps an existing segment; throws IoError if it is missing or its size
  // differs from `bytes`.
  static Segment open(const std::string& name, std::size_t bytes);

  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();  // unmaps; unlinks too if this process created it and has not yet

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Removes the name (the mapping stays valid). Idempotent.
  void unlink();

 private:
  Segment(std::string name, std::byte* data, std::size_t size, bool owner)
      : name_(std::move(name)), data_(data), size_(size), owner_(owner) {}
  void release();

  std::string name_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  bool owner_ = false;  // created here and not yet unlinked
};

}  // namespace chorus::shm
