// What the ranks of a fusion engine agree on each cycle, as pure functions
// over what every rank reported (lib/fusion/engine.hpp runs the exchange).
//
// Terms:
//   tensor spec    a submitted tensor's name, element count, dtype and op;
//                  the name is what ranks match on
//   pending        submitted on this rank and not yet reduced or failed
//   known tensor   a name that was reduced before: it has an id, the same on
//                  every rank (ids go in order of first reduction), and a
//                  slot in the ready bits of the fast path
//   ready          pending on every rank with one spec: reducible now
//
// Two ways to agree, each one or two small collectives per cycle:
//   fast path      every rank contributes a byte per known tensor (1: pending
//                  here) and flag bytes, reduced with MIN: a known tensor is
//                  ready where the result is 1. Nothing else moves.
//   slow path      when any rank has a name that is not known (or known with
//                  another spec), suspects a stall or shuts down (a flag of
//                  the fast path says so): every rank's full pending list is
//                  allgathered (encode_report), and agree() finds the ready
//                  tensors, the mismatches and who lacks what.
// Both are deterministic functions of data every rank holds alike, so every
// rank reduces the same tensors in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/core/dtype.hpp"

namespace chorus::fusion {

// What ranks must agree on for a name: a tensor's count, dtype and op.
struct TensorShape {
  uint64_t count = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;

  std::size_t bytes() const { return static_cast<std::size_t>(count) * dtype_size(dtype); }
  bool operator==(const TensorShape&) const = default;
};

struct TensorSpec {
  std::string name;
  uint64_t count = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;

  std::size_t bytes() const { return shape().bytes(); }
  TensorShape shape() const { return {count, dtype, op}; }
  bool same_shape(const TensorShape& o) const { return shape() == o; }
  bool same_shape(const TensorSpec& o) const { return same_shape(o.shape()); }
};

// "'conv1.weight' (count 9408, float32, sum)"
std::string describe(const TensorSpec& spec);

// The flag bytes at the head of the fast path's vector (each sent as 1 - flag,
// so that MIN gives 0 when any rank raised it).
enum Flag : std::size_t {
  kHasNew = 0,      // a pending name that is not known, or known with another spec
  kStallCheck = 1,  // a tensor pending here longer than CHORUS_FUSION_STALL_S
  kTimedOut = 2,    // a tensor pending here longer than CHORUS_TIMEOUT
  kShutdown = 3,    // this rank's engine stops (communicator destroyed)
  kFlagCount = 4,
};

// The fast path's byte per known tensor, after the flags; MIN over the ranks
// keeps the least any rank said.
enum KnownByte : uint8_t {
  kNotPending = 0,
  kPending = 1,
  // Pending, and lying right after the tensor of the id before it (pending
  // too, of the same dtype and op) in memory: plan_buckets's follows_of.
  kPendingAfterPrevious = 2,
};

// One rank's slow-path report: its raised flags (bit i: Flag i) and every
// pending tensor in submission order.
struct RankReport {
  uint32_t flags = 0;
  std::vector<TensorSpec> pending;
  bool has(Flag f) const { return (flags >> f) & 1u; }
};

std::vector<uint8_t> encode_report(const RankReport& report);
// Throws InvariantError on bytes encode_report cannot have made.
RankReport decode_report(std::span<const uint8_t> bytes);

// A name pending on some ranks and not on others.
struct Missing {
  TensorSpec spec;
  std::vector<int> have;  // ranks with it pending
  std::vector<int> lack;  // ranks without
};

// Two ranks that pending the same name with different specs.
struct Mismatch {
  TensorSpec first;  // as first_rank has it
  int first_rank = -1;
  TensorSpec other;
  int other_rank = -1;
};

struct Agreement {
  std::vector<TensorSpec> ready;     // in execution order: rank 0's submission order
  std::vector<Missing> missing;      // in rank 0's order, then the others' by rank
  std::optional<Mismatch> mismatch;  // the first found (lowest rank pair, rank 0's order)
};

Agreement agree(std::span<const RankReport> reports);

// "tensor 'w' was submitted by rank 0, 2 and not by rank 1"
std::string describe(const Missing& missing);
std::string describe(const Mismatch& mismatch);

// The known tensors: specs with ids (order of first reduction), the same on
// every rank because every rank adds the same tensors in the same order.
// Which name has which id is the caller's to keep (the engine keeps it in
// the name's record), so a name is added once.
class KnownTable {
 public:
  explicit KnownTable(std::size_t capacity) : capacity_(capacity) {}
  const TensorSpec& at(uint32_t id) const { return specs_[id]; }
  std::size_t size() const { return specs_.size(); }
  // Adds a spec while there is room and returns its id; nullopt when full.
  std::optional<uint32_t> add(const TensorSpec& spec) {
    if (specs_.size() >= capacity_) return std::nullopt;
    specs_.push_back(spec);
    return static_cast<uint32_t>(specs_.size() - 1);
  }
  // A known name reduced with another spec (every rank agreed on it) keeps
  // its id with the new spec.
  void update(uint32_t id, const TensorSpec& spec) { specs_[id] = spec; }

 private:
  std::size_t capacity_;
  std::vector<TensorSpec> specs_;
};

// A run of ready tensors (indices [first, last) of the ready list after
// grouping) reduced by one allreduce.
struct Bucket {
  std::size_t first = 0, last = 0;
  std::size_t bytes = 0;
  std::size_t size() const { return last - first; }
};

// The grouping key of a spec: tensors of one (dtype, op) can share a bucket.
inline int group_key(const TensorShape& shape) {
  return static_cast<int>(shape.dtype) * kReduceOpCount + static_cast<int>(shape.op);
}
inline int group_key(const TensorSpec& spec) {
  return group_key(spec.shape());
}

// Orders `ready` in place so that tensors of one (dtype, op) are adjacent (a
// stable grouping: the first group is the first tensor's), then cuts it into
// buckets of one (dtype, op) and at most fusion_bytes each:
//   - a tensor larger than fusion_bytes, or of alone_bytes or more, gets a
//     bucket of its own (where buckets are packed, copying it would cost
//     more than the call it saves), unless it extends a run;
//   - a run is a bucket whose every tensor after its first follows the one
//     before it: follows_of(item) says that the item lies right after the
//     item before it in `ready` as given, in memory, on every rank (the
//     negotiation agrees on it; such a pair has one (dtype, op), so grouping
//     keeps it together). Every rank reduces a run where it lies, with no
//     copy, so a tensor of any size that follows a run extends it (within
//     fusion_bytes);
//   - a smaller tensor joins the open bucket of its group when that holds no
//     tensor of alone_bytes or more (or extends it as a run).
// spec_of(item) gives an item's TensorSpec or TensorShape. Linear in the
// number of tensors.
template <typename T, typename SpecOf, typename FollowsOf>
std::vector<Bucket> plan_buckets(std::vector<T>& ready, std::size_t fusion_bytes,
                                 std::size_t alone_bytes, SpecOf spec_of, FollowsOf follows_of) {
  constexpr int kKeys = kDataTypeCount * kReduceOpCount;
  int order[kKeys];  // a key's place among the groups, -1: not seen
  for (int& o : order) o = -1;
  std::vector<std::size_t> group_size;
  for (const auto& item : ready) {
    int& o = order[group_key(spec_of(item))];
    if (o < 0) {
      o = static_cast<int>(group_size.size());
      group_size.push_back(0);
    }
    ++group_size[static_cast<std::size_t>(o)];
  }
  std::vector<std::size_t> start(group_size.size(), 0);
  for (std::size_t g = 1; g < start.size(); ++g) start[g] = start[g - 1] + group_size[g - 1];
  std::vector<Bucket> out;
  if (group_size.size() > 1) {
    std::vector<T> grouped(ready.size());
    auto next = start;
    for (auto& item : ready) {
      const auto g = static_cast<std::size_t>(order[group_key(spec_of(item))]);
      grouped[next[g]++] = std::move(item);
    }
    ready = std::move(grouped);
  }
  int open_key = -1;      // the open (last) bucket's group; -1: none
  bool open_big = false;  // it holds a tensor of alone_bytes or more
  bool open_run = false;  // each of its tensors follows the one before it
  for (std::size_t i = 0; i < ready.size(); ++i) {
    const auto& spec = spec_of(ready[i]);
    const std::size_t bytes = spec.bytes();
    const bool big = bytes > fusion_bytes || bytes >= alone_bytes;
    const int key = group_key(spec);
    const bool fits = key == open_key && out.back().bytes + bytes <= fusion_bytes;
    const bool follows = fits && follows_of(ready[i]);
    if (fits && ((open_run && follows) || (!big && !open_big))) {
      out.back().last = i + 1;
      out.back().bytes += bytes;
      open_big = open_big || big;
      open_run = open_run && follows;
    } else {
      out.push_back({i, i + 1, bytes});
      open_key = key;
      open_big = big;
      open_run = true;
    }
  }
  return out;
}

// The same where no tensor is known to follow another (each bucket of more
// than one tensor is then in parts on some rank, for all the plan knows).
template <typename T, typename SpecOf>
std::vector<Bucket> plan_buckets(std::vector<T>& ready, std::size_t fusion_bytes,
                                 std::size_t alone_bytes, SpecOf spec_of) {
  return plan_buckets(ready, fusion_bytes, alone_bytes, spec_of, [](const T&) { return false; });
}

inline std::vector<Bucket> plan_buckets(std::vector<TensorSpec>& ready, std::size_t fusion_bytes,
                                        std::size_t alone_bytes = SIZE_MAX) {
  return plan_buckets(ready, fusion_bytes, alone_bytes,
                      [](const TensorSpec& s) -> const TensorSpec& { return s; });
}

}  // namespace chorus::fusion
