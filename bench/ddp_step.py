#!/usr/bin/env python3
"""DDP step time of examples/train's CNN, chorus backend against gloo, in one job:

    chorusrun -np 2 python3 bench/ddp_step.py [--batch-size 64] [--steps 20] [--repeats 7]

Method (printed with the results): every rank builds the same model twice,
one DistributedDataParallel over a gloo process group (the default group) and
one over a chorus group (new_group(backend="chorus")), each with its own Adam.
For each repeat, in alternating order of the backends, every rank runs
--steps pairs of steps (forward / backward / optimizer step on a fixed batch
of Fashion-MNIST images, --batch-size per rank), each timed alone after a
barrier:
  sync:    a normal DDP step (gradients all-reduced, overlapping backward);
  compute: the same step under model.no_sync() (no communication at all).
A step's time is the slowest rank's; a repeat's sync and compute times are the
medians over its steps (robust to the machine's other load). comm = sync -
compute is the communication DDP does not hide behind the backward pass (its
exposed share), not the wire time of the all-reduces. Results are medians
over the repeats; the ratios are gloo / chorus (> 1: chorus faster).
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "train"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import train  # noqa: E402  (examples/train/train.py: the model, the data, the process group)


def one_step(net, optimizer, x, y, sync):
    """Seconds of one step on this rank, after a barrier (so every rank starts it together)."""
    dist.barrier()
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    if sync:
        F.cross_entropy(net(x), y).backward()
    else:
        with net.no_sync():
            F.cross_entropy(net(x), y).backward()
    optimizer.step()
    return time.perf_counter() - start


def slowest(seconds):
    """The max over ranks (on the default gloo group, outside the timed steps)."""
    t = torch.tensor(seconds, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch-size", type=int, default=64, help="images per rank per step")
    p.add_argument("--steps", type=int, default=20, help="(sync, compute) step pairs per repeat and backend")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--warmup", type=int, default=6, help="untimed steps per backend first")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads per rank")
    p.add_argument("--data-dir", default=train.DATA_DIR)
    args = p.parse_args(argv)

    rank, ranks = train.launcher_rank()
    torch.set_num_threads(args.threads)
    import chorus.torch  # noqa: F401  (registers the backend "chorus")
    train.init_torch_distributed("gloo", rank, ranks)
    chorus_group = dist.new_group(backend="chorus")

    images, labels, _, _ = train.load_fashion_mnist(args.data_dir)
    pick = torch.from_numpy(np.random.default_rng(rank).choice(len(images), args.batch_size, replace=False))
    x, y = train.to_input(images[pick]), labels[pick]

    nets = {}
    for backend, group in (("chorus", chorus_group), ("gloo", None)):
        torch.manual_seed(0)
        net = torch.nn.parallel.DistributedDataParallel(train.Net(), process_group=group)
        nets[backend] = (net, torch.optim.Adam(net.parameters(), lr=1e-3))
    for backend, (net, optimizer) in nets.items():
        for step in range(args.warmup):
            one_step(net, optimizer, x, y, step % 2 == 0)

    # Per repeat and backend: --steps pairs of (sync step, compute step), each
    # step timed alone; the repeat's figure is the median over its steps.
    times = {b: {"sync": [], "compute": [], "comm": []} for b in nets}
    for repeat in range(args.repeats):
        order = list(nets) if repeat % 2 == 0 else list(reversed(nets))
        for backend in order:
            net, optimizer = nets[backend]
            steps = [one_step(net, optimizer, x, y, sync) for _ in range(args.steps) for sync in (True, False)]
            steps = slowest(steps)
            sync, compute = statistics.median(steps[0::2]), statistics.median(steps[1::2])
            times[backend]["sync"].append(sync)
            times[backend]["compute"].append(compute)
            times[backend]["comm"].append(sync - compute)

    if rank == 0:
        params = sum(p.numel() for p in train.Net().parameters())
        print(f"DDP step of examples/train's CNN ({params} float32 parameters, {4 * params / 1e6:.2f} MB of "
              f"gradients), {ranks} ranks, batch {args.batch_size}/rank, {args.threads} thread(s)/rank, "
              f"{args.repeats} repeats x {args.steps} step pairs")
        print("method: sync = normal DDP step; compute = the same step under no_sync() (no "
              "communication), alternating, each timed alone after a barrier, the slowest rank's; "
              "comm = sync - compute (exposed communication); median over steps, then over repeats")
        print(f"{'backend':8} {'sync ms':>9} {'compute ms':>11} {'comm ms':>9} {'comm share':>11}")
        med = {}
        for backend in nets:
            m = {k: statistics.median(v) * 1e3 for k, v in times[backend].items()}
            med[backend] = m
            print(f"{backend:8} {m['sync']:9.2f} {m['compute']:11.2f} {m['comm']:9.2f} "
                  f"{100 * m['comm'] / m['sync']:10.1f}%")
        if med["chorus"]["comm"] > 0 and med["gloo"]["comm"] > 0:
            comm_ratio = f"{med['gloo']['comm'] / med['chorus']['comm']:.2f}"
        else:
            comm_ratio = "n/a (a comm median <= 0: within the noise)"
        print(f"gloo/chorus: step time {med['gloo']['sync'] / med['chorus']['sync']:.2f}, "
              f"comm {comm_ratio}")
        spread = {b: (min(times[b]["comm"]) * 1e3, max(times[b]["comm"]) * 1e3) for b in nets}
        print("comm range over repeats (ms): " +
              ", ".join(f"{b} {lo:.2f}..{hi:.2f}" for b, (lo, hi) in spread.items()))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
