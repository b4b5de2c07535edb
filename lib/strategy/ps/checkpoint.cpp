#include "lib/strategy/ps/checkpoint.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/core/error.hpp"

namespace chorus::strategy::ps {

namespace {

constexpr const char* kMagic = "chorus-ps-checkpoint 1";

[[noreturn]] void io_failure(const std::string& path, const std::string& what) {
  throw IoError(CHORUS_ERR_IO, fmt::format("checkpoint {}: {}", path, what));
}

}  // namespace

void write_checkpoint(const std::string& path, const std::vector<CheckpointEntry>& entries,
                      int64_t step) {
  nlohmann::json layout = {{"step", step}, {"variables", nlohmann::json::array()}};
  for (const auto& e : entries)
    layout["variables"].push_back(
        {{"name", e.name}, {"dtype", std::string(dtype_name(e.dtype))}, {"count", e.count}});
  const std::string temporary = path + ".partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) io_failure(temporary, errno_message("cannot open", errno));
    out << kMagic << '\n' << layout.dump() << '\n';
    XXH64_state_t* state = XXH64_createState();
    XXH64_reset(state, 0);
    for (const auto& e : entries) {
      const std::size_t bytes = e.count * dtype_size(e.dtype);
      out.write(static_cast<const char*>(e.data), static_cast<std::streamsize>(bytes));
      XXH64_update(state, e.data, bytes);
    }
    uint64_t digest = XXH64_digest(state);
    XXH64_freeState(state);
    out.write(reinterpret_cast<const char*>(&digest), sizeof digest);
    out.flush();
    if (!out) io_failure(temporary, "write failed");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    io_failure(path, errno_message("cannot rename " + temporary + " to it", errno));
}

int64_t read_checkpoint(const std::string& path, const std::vector<CheckpointEntry>& entries) {
  std::ifstream in(path, std::ios::binary);
  if (!in) io_failure(path, errno_message("cannot open", errno));
  std::string magic, text;
  std::getline(in, magic);
  if (magic != kMagic) io_failure(path, "not a Chorus parameter-server checkpoint");
  std::getline(in, text);
  nlohmann::json layout;
  try {
    layout = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    io_failure(path, fmt::format("damaged header: {}", e.what()));
  }
  const auto& saved = layout.at("variables");
  if (saved.size() != entries.size())
    throw UsageError(fmt::format("checkpoint {} holds {} variable(s); the strategy has {}", path,
                                 saved.size(), entries.size()));
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    const std::string name = saved[i].at("name").get<std::string>();
    const std::string dtype = saved[i].at("dtype").get<std::string>();
    const std::size_t count = saved[i].at("count").get<std::size_t>();
    if (name != e.name || dtype != dtype_name(e.dtype) || count != e.count)
      throw UsageError(fmt::format(
          "checkpoint {}: variable {} is '{}' ({} x {}); the strategy's is '{}' ({} x {})", path, i,
          name, count, dtype, e.name, e.count, dtype_name(e.dtype)));
  }
  // Read into place, then check the digest; a damaged file leaves damaged
  // values behind, but the caller gets the error.
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  for (const auto& e : entries) {
    const std::size_t bytes = e.count * dtype_size(e.dtype);
    in.read(static_cast<char*>(e.data), static_cast<std::streamsize>(bytes));
    XXH64_update(state, e.data, bytes);
  }
  uint64_t digest = XXH64_digest(state), stored = 0;
  XXH64_freeState(state);
  in.read(reinterpret_cast<char*>(&stored), sizeof stored);
  if (!in) io_failure(path, "truncated");
  if (stored != digest) io_failure(path, "checksum mismatch: the file is damaged");
  return layout.at("step").get<int64_t>();
}

}  // namespace chorus::strategy::ps
