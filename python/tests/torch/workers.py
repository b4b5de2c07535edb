"""What each rank of the torch backend tests runs (in a spawned process:
imported by name, so it lives in a module of its own). Each worker returns a
value for the parent or raises; run_ranks in test_torch_backend.py collects
both."""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import chorus.torch  # noqa: F401  (registers the backend "chorus")

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64]


def init(rank, world_size, init_file, backend="chorus", timeout_s=60):
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=timeout_s))


def values(rank, n, dtype, salt=0):
    """Rank-dependent small integers: exact in every dtype, sums included."""
    return (torch.arange(n, dtype=torch.int64) % 7 + rank + 1 + salt).to(dtype)


def check(name, got, expected):
    if not torch.equal(got, expected):
        raise AssertionError(f"{name}: got {got.tolist()}, expected {expected.tolist()}")


def collectives(rank, world_size, init_file):
    """Every collective of the backend, checked against references computed here."""
    init(rank, world_size, init_file)
    n, ws = 6, world_size
    for dtype in DTYPES:
        tag = str(dtype)
        every = [values(r, n, dtype) for r in range(ws)]
        stacked = torch.stack([e.to(torch.float64) for e in every])
        for op, ref in [(dist.ReduceOp.SUM, stacked.sum(0)), (dist.ReduceOp.MAX, stacked.max(0)[0]),
                        (dist.ReduceOp.MIN, stacked.min(0)[0]),
                        (dist.ReduceOp.PRODUCT, stacked.prod(0))]:
            t = values(rank, n, dtype)
            dist.all_reduce(t, op=op)
            check(f"all_reduce {op} {tag}", t, ref.to(dtype))
        if dtype.is_floating_point:
            t = values(rank, n, dtype)
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            torch.testing.assert_close(t, (stacked.sum(0) / ws).to(dtype))
        # async: wait() and the future's value
        t = values(rank, n, dtype)
        work = dist.all_reduce(t, async_op=True)
        fut_value = work.get_future().wait()
        work.wait()
        check(f"all_reduce async {tag}", t, stacked.sum(0).to(dtype))
        check(f"future of all_reduce {tag}", fut_value[0], stacked.sum(0).to(dtype))
        # coalesced
        a, b = values(rank, n, dtype), values(rank, 3, dtype, salt=2)
        dist.all_reduce_coalesced([a, b])
        check(f"all_reduce_coalesced {tag}", a, stacked.sum(0).to(dtype))
        check(f"all_reduce_coalesced {tag} (2)",
              b, sum(values(r, 3, torch.float64, salt=2) for r in range(ws)).to(dtype))
        # broadcast from the last rank
        t = values(rank, n, dtype)
        dist.broadcast(t, src=ws - 1)
        check(f"broadcast {tag}", t, every[ws - 1])
        # reduce to rank 0
        t = values(rank, n, dtype)
        dist.reduce(t, dst=0)
        if rank == 0:
            check(f"reduce {tag}", t, stacked.sum(0).to(dtype))
        # all_gather (list), all_gather_into_tensor
        out = [torch.zeros(n, dtype=dtype) for _ in range(ws)]
        dist.all_gather(out, values(rank, n, dtype))
        for r in range(ws):
            check(f"all_gather {tag} block {r}", out[r], every[r])
        flat = torch.zeros(ws * n, dtype=dtype)
        dist.all_gather_into_tensor(flat, values(rank, n, dtype))
        check(f"all_gather_into_tensor {tag}", flat, torch.cat(every))
        # all_gather_coalesced: outs[rank][input] (torch's layout, as gloo's),
        # two inputs of different sizes
        outs = [[torch.zeros(n, dtype=dtype), torch.zeros(1, dtype=dtype)] for _ in range(ws)]
        dist.all_gather_coalesced(outs, [values(rank, n, dtype), values(rank, 1, dtype)])
        for r in range(ws):
            check(f"all_gather_coalesced {tag} block {r}", outs[r][0], every[r])
            check(f"all_gather_coalesced {tag} block {r} (2)", outs[r][1], values(r, 1, dtype))
        # gather / scatter at rank 0
        gathered = [torch.zeros(n, dtype=dtype) for _ in range(ws)] if rank == 0 else None
        dist.gather(values(rank, n, dtype), gather_list=gathered, dst=0)
        if rank == 0:
            for r in range(ws):
                check(f"gather {tag} block {r}", gathered[r], every[r])
        received = torch.zeros(n, dtype=dtype)
        dist.scatter(received, scatter_list=every if rank == 0 else None, src=0)
        check(f"scatter {tag}", received, every[rank])
        # reduce_scatter (list) and reduce_scatter_tensor: block r of every rank's input
        blocks = [values(rank, n, dtype, salt=r) for r in range(ws)]
        expect = sum(values(q, n, torch.float64, salt=rank) for q in range(ws)).to(dtype)
        out = torch.zeros(n, dtype=dtype)
        dist.reduce_scatter(out, blocks)
        check(f"reduce_scatter {tag}", out, expect)
        out = torch.zeros(n, dtype=dtype)
        dist.reduce_scatter_tensor(out, torch.cat(blocks))
        check(f"reduce_scatter_tensor {tag}", out, expect)
        # all_to_all_single (equal splits), all_to_all (lists)
        out = torch.zeros(ws * n, dtype=dtype)
        dist.all_to_all_single(out, torch.cat(blocks))
        check(f"all_to_all_single {tag}", out,
              torch.cat([values(q, n, dtype, salt=rank) for q in range(ws)]))
        outs = [torch.zeros(n, dtype=dtype) for _ in range(ws)]
        dist.all_to_all(outs, blocks)
        for q in range(ws):
            check(f"all_to_all {tag} from {q}", outs[q], values(q, n, dtype, salt=rank))
    # unequal splits: rank r sends q + 1 rows to rank q
    in_splits = [q + 1 for q in range(ws)]
    out_splits = [rank + 1] * ws
    source = torch.cat([torch.full((q + 1, 2), float(rank * 10 + q)) for q in range(ws)])
    out = torch.zeros(sum(out_splits), 2)
    dist.all_to_all_single(out, source, out_splits, in_splits)
    check("all_to_all_single unequal", out,
          torch.cat([torch.full((rank + 1, 2), float(q * 10 + rank)) for q in range(ws)]))
    # send/recv around a ring, then a barrier
    nxt, prv = (rank + 1) % ws, (rank - 1) % ws
    got = torch.zeros(4)
    if rank % 2 == 0:
        dist.send(torch.full((4,), float(rank)), dst=nxt)
        dist.recv(got, src=prv)
    else:
        dist.recv(got, src=prv)
        dist.send(torch.full((4,), float(rank)), dst=nxt)
    check("send/recv", got, torch.full((4,), float(prv)))
    dist.barrier()
    dist.destroy_process_group()
    return "ok"


def subgroup(rank, world_size, init_file):
    """new_group([0, 2]) of 3 ranks: its allreduce, and rank 1 never joins it."""
    init(rank, world_size, init_file)
    group = dist.new_group([0, 2])
    result = None
    if rank in (0, 2):
        t = torch.full((5,), float(rank + 1))
        dist.all_reduce(t, group=group)
        result = t.tolist()
    t = torch.ones(3)
    dist.all_reduce(t)  # the world group still works afterwards
    check("world allreduce after the subgroup's", t, torch.full((3,), 3.0))
    dist.destroy_process_group()
    return result


def _train(process_group, hook, steps=5):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=process_group)
    if hook is not None:
        ddp.register_comm_hook(process_group, hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    rank = dist.get_rank()
    data = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(4, 8, generator=data)
        y = torch.randn(4, 2, generator=data)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def ddp_against_gloo(rank, world_size, init_file):
    """The same DDP training over chorus and over gloo, with and without fp16 compression."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    init(rank, world_size, init_file)
    gloo = dist.new_group(backend="gloo")
    world = dist.group.WORLD
    report = {}
    for name, hook in [("plain", None), ("fp16", default_hooks.fp16_compress_hook)]:
        ours = _train(world, hook)
        theirs = _train(gloo, hook)
        report[name] = max((a - b).abs().max().item() for a, b in zip(ours, theirs))
        # Parameters agree across ranks too (one model, replicated).
        flat = torch.cat([p.reshape(-1) for p in ours])
        copy = flat.clone()
        dist.broadcast(copy, src=0)
        report[name + "_replicas"] = (flat - copy).abs().max().item()
    dist.destroy_process_group()
    return report


def peer_dies(rank, world_size, init_file):
    """Rank 1 exits after the first allreduce; rank 0's next one must fail soon, naming it."""
    init(rank, world_size, init_file)
    dist.all_reduce(torch.ones(4))
    if rank == 1:
        os._exit(3)
    time.sleep(0.5)
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4))
    except Exception as error:  # noqa: BLE001  (the class is checked by the test)
        return {"class": type(error).__name__, "text": str(error),
                "seconds": time.monotonic() - start}
    return {"class": None, "text": "no error", "seconds": time.monotonic() - start}
