#include "lib/strategy/replica_check.hpp"

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/core/error.hpp"

namespace chorus::strategy {

uint64_t digest_bytes(const void* data, std::size_t bytes) {
  return XXH64(data, bytes, 0);
}

uint64_t digest_layout(std::span<const VariableLayout> variables) {
  XXH64_state_t state;
  XXH64_reset(&state, 0);
  for (const auto& v : variables) {
    // Lengths go in first, so that ("ab", "c") and ("a", "bc") differ.
    const uint64_t fields[3] = {v.name.size(), v.count, static_cast<uint64_t>(v.dtype)};
    XXH64_update(&state, fields, sizeof fields);
    XXH64_update(&state, v.name.data(), v.name.size());
  }
  return XXH64_digest(&state);
}

std::optional<Divergence> first_divergence(std::span<const uint64_t> gathered, int ranks) {
  CHORUS_CHECK(
      ranks > 0 && gathered.size() % static_cast<std::size_t>(ranks) == 0 && !gathered.empty(),
      "{} digests from {} ranks", gathered.size(), ranks);
  const std::size_t per_rank = gathered.size() / static_cast<std::size_t>(ranks);
  for (std::size_t i = 0; i < per_rank; ++i)
    for (int r = 1; r < ranks; ++r) {
      const uint64_t theirs = gathered[static_cast<std::size_t>(r) * per_rank + i];
      if (theirs != gathered[i])
        return Divergence{static_cast<int64_t>(i) - 1, r, theirs, gathered[i]};
    }
  return std::nullopt;
}

std::string describe_divergence(const Divergence& d, std::span<const std::string> names,
                                uint64_t step) {
  if (d.variable < 0)
    return fmt::format(
        "replicas diverged at step {}: rank {} registered other variables than rank 0 (names, "
        "counts, dtypes or their order differ; layout digest 0x{:016x} vs 0x{:016x})",
        step, d.rank, d.theirs, d.reference);
  CHORUS_CHECK(static_cast<std::size_t>(d.variable) < names.size(), "variable {} of {}", d.variable,
               names.size());
  return fmt::format(
      "replicas diverged at step {}: variable '{}' on rank {} differs from rank 0 (digest "
      "0x{:016x} vs 0x{:016x})",
      step, names[static_cast<std::size_t>(d.variable)], d.rank, d.theirs, d.reference);
}

}  // namespace chorus::strategy
