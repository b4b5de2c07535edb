#include "collectives/allreduce/wire.hpp"

#include <algorithm>

#include "collectives/common/scratch_slots.hpp"
#include "collectives/common/slices.hpp"

namespace chorus {

std::optional<DataType> wire_dtype_of(const CollectiveCall& call,
                                      std::optional<DataType> configured, int size) {
  if (call.kind != CollectiveKind::allreduce || call.dtype != DataType::f32 || size <= 1)
    return std::nullopt;
  const std::optional<DataType> wire = call.wire ? call.wire : configured;
  if (!wire || *wire == DataType::f32) return std::nullopt;
  return wire;
}

WirePlan plan_wire(const CollectiveCall& call, DataType wire, int size) {
  WirePlan plan;
  plan.wire = wire;
  plan.inner = call;
  plan.inner.dtype = wire;
  plan.inner.wire.reset();
  plan.inner.op = call.op == ReduceOp::avg ? ReduceOp::sum : call.op;
  plan.inner.send = nullptr;
  plan.inner.recv = nullptr;
  plan.shape.elem = dtype_size(wire);
  plan.shape.bytes = call.count * plan.shape.elem;
  plan.sig = signature_of(call, size, CallShape{});
  plan.sig.layout = kWireLayout | static_cast<uint32_t>(wire);
  return plan;
}

void run_wire_allreduce(CollectiveContext& ctx, const AlgorithmSpec& algo,
                        const CollectiveCall& call, const WirePlan& plan) {
  if (algo.run_wire) return algo.run_wire(ctx, call, plan);
  const std::size_t n = call.count;
  std::byte* buf =
      ctx.scratch.get(scratch_slot::wire, std::min(n, kWirePieceElements) * plan.shape.elem).data();
  const int divide_by = call.op == ReduceOp::avg ? ctx.size() : 1;
  const auto* send = static_cast<const float*>(call.send);
  auto* recv = static_cast<float*>(call.recv);
  CollectiveCall inner = plan.inner;
  inner.send = buf;
  inner.recv = buf;
  CallShape shape = plan.shape;
  for_each_slice(n, kWirePieceElements, [&](std::size_t at, std::size_t m) {
    narrow_from_f32(send + at, buf, m, plan.wire);
    inner.count = m;
    shape.bytes = m * shape.elem;
    algo.run(ctx, inner, shape);
    widen_to_f32(buf, recv + at, m, plan.wire, divide_by);
  });
}

}  // namespace chorus
