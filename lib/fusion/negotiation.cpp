#include "lib/fusion/negotiation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "base/core/error.hpp"

namespace chorus::fusion {
namespace {

// Report layout (little-endian host order; both ends are this build):
//   u32 flags, u32 tensor count, then per tensor:
//   u64 count, u8 dtype, u8 op, u16 name length, name bytes.
constexpr std::size_t kHeader = 8;
constexpr std::size_t kPerTensor = 12;
constexpr std::size_t kMaxName = 0xffff;

template <typename T>
void put(std::vector<uint8_t>& out, T value) {
  const auto at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

template <typename T>
T take(std::span<const uint8_t> bytes, std::size_t& at) {
  CHORUS_CHECK(at + sizeof(T) <= bytes.size(), "fusion report truncated at byte {} of {}", at,
               bytes.size());
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof(T));
  at += sizeof(T);
  return value;
}

std::string rank_list(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

}  // namespace

std::string describe(const TensorSpec& spec) {
  return fmt::format("'{}' (count {}, {}, {})", spec.name, spec.count, dtype_name(spec.dtype),
                     op_name(spec.op));
}

std::vector<uint8_t> encode_report(const RankReport& report) {
  std::vector<uint8_t> out;
  std::size_t size = kHeader;
  for (const auto& t : report.pending) size += kPerTensor + t.name.size();
  out.reserve(size);
  put<uint32_t>(out, report.flags);
  put<uint32_t>(out, static_cast<uint32_t>(report.pending.size()));
  for (const auto& t : report.pending) {
    CHORUS_CHECK(t.name.size() <= kMaxName, "tensor name of {} bytes", t.name.size());
    put<uint64_t>(out, t.count);
    put<uint8_t>(out, static_cast<uint8_t>(t.dtype));
    put<uint8_t>(out, static_cast<uint8_t>(t.op));
    put<uint16_t>(out, static_cast<uint16_t>(t.name.size()));
    out.insert(out.end(), t.name.begin(), t.name.end());
  }
  return out;
}

RankReport decode_report(std::span<const uint8_t> bytes) {
  RankReport report;
  std::size_t at = 0;
  report.flags = take<uint32_t>(bytes, at);
  const auto n = take<uint32_t>(bytes, at);
  CHORUS_CHECK(n <= bytes.size() / kPerTensor, "fusion report claims {} tensors in {} bytes", n,
               bytes.size());
  report.pending.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    TensorSpec t;
    t.count = take<uint64_t>(bytes, at);
    const auto dtype = take<uint8_t>(bytes, at);
    const auto op = take<uint8_t>(bytes, at);
    CHORUS_CHECK(valid_dtype(dtype) && valid_op(op), "fusion report: dtype {} op {}", dtype, op);
    t.dtype = static_cast<DataType>(dtype);
    t.op = static_cast<ReduceOp>(op);
    const auto len = take<uint16_t>(bytes, at);
    CHORUS_CHECK(at + len <= bytes.size(), "fusion report: name of {} bytes at {} of {}", len, at,
                 bytes.size());
    t.name.assign(reinterpret_cast<const char*>(bytes.data() + at), len);
    at += len;
    report.pending.push_back(std::move(t));
  }
  CHORUS_CHECK(at == bytes.size(), "fusion report: {} bytes left over", bytes.size() - at);
  return report;
}

Agreement agree(std::span<const RankReport> reports) {
  Agreement out;
  const int n = static_cast<int>(reports.size());
  // Every name in first-seen order (rank 0's submission order, then rank 1's
  // new names, ...), with the spec and ranks that have it pending.
  struct Seen {
    TensorSpec spec;
    int first_rank;
    std::vector<int> have;
  };
  std::vector<Seen> seen;
  std::unordered_map<std::string, std::size_t> index;
  for (int r = 0; r < n; ++r)
    for (const auto& t : reports[static_cast<std::size_t>(r)].pending) {
      auto [it, fresh] = index.emplace(t.name, seen.size());
      if (fresh) {
        seen.push_back({t, r, {r}});
        continue;
      }
      Seen& s = seen[it->second];
      if (!s.spec.same_shape(t) && !out.mismatch)
        out.mismatch = Mismatch{s.spec, s.first_rank, t, r};
      if (s.have.back() != r) s.have.push_back(r);
    }
  for (auto& s : seen) {
    if (static_cast<int>(s.have.size()) == n) {
      out.ready.push_back(std::move(s.spec));
      continue;
    }
    Missing m{std::move(s.spec), std::move(s.have), {}};
    for (int r = 0, i = 0; r < n; ++r) {
      if (i < static_cast<int>(m.have.size()) && m.have[static_cast<std::size_t>(i)] == r)
        ++i;
      else
        m.lack.push_back(r);
    }
    out.missing.push_back(std::move(m));
  }
  return out;
}

std::string describe(const Missing& m) {
  return fmt::format("tensor {} was submitted by {} and not by {}", describe(m.spec),
                     rank_list(m.have), rank_list(m.lack));
}

std::string describe(const Mismatch& m) {
  return fmt::format(
      "tensor '{}' was submitted with count {}, {}, {} on rank {} and with count {}, {}, {} on "
      "rank {}",
      m.first.name, m.first.count, dtype_name(m.first.dtype), op_name(m.first.op), m.first_rank,
      m.other.count, dtype_name(m.other.dtype), op_name(m.other.op), m.other_rank);
}

}  // namespace chorus::fusion
