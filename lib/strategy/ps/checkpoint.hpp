// A parameter-server checkpoint: every variable's value, by name, in one
// file that the chief writes and reads.
//
//   line 1   "chorus-ps-checkpoint 1"
//   line 2   JSON: {"step": S, "variables": [{"name", "dtype", "count"}, ...]}
//   then     the variables' bytes back to back, in that order
//   then     8 bytes: XXH64 of those bytes (little-endian)
//
// The file is written beside its path and renamed into place, so a crash
// while saving leaves the previous checkpoint whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/core/dtype.hpp"

namespace chorus::strategy::ps {

struct CheckpointEntry {
  std::string name;
  DataType dtype = DataType::f32;
  std::size_t count = 0;
  void* data = nullptr;  // write: read from; read: written to
};

// Throws IoError (CHORUS_ERR_IO) naming the path when it cannot be written.
void write_checkpoint(const std::string& path, const std::vector<CheckpointEntry>& entries,
                      int64_t step);
// Fills every entry's data from the file and returns its step. Throws
// IoError when the file cannot be read or is damaged (checksum), UsageError
// (CHORUS_ERR_INVALID_ARGUMENT) when its variables differ from `entries` in
// names, order, dtypes or counts, naming the first difference.
int64_t read_checkpoint(const std::string& path, const std::vector<CheckpointEntry>& entries);

}  // namespace chorus::strategy::ps
