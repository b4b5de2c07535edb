#!/usr/bin/env python3
"""gloo_allreduce_bench: PyTorch's gloo allreduce timed as chorus-bench and
mpi_allreduce_bench time theirs, with the same flags, iteration rule and JSON
rows, so bench/compare.py --gloo can put Gloo beside Chorus and Open MPI.

  chorusrun -np 2 --bind-to none python3 bench/gloo_allreduce_bench.py \\
      --store-file /tmp/gloo.store -b 8 -e 64M -f 4 --json
  torchrun --nproc-per-node 2 bench/gloo_allreduce_bench.py -b 8 -e 64M

Ranks come from chorusrun (CHORUS_RANK, CHORUS_WORLD_SIZE) or torchrun (RANK,
WORLD_SIZE); the rendezvous is a torch FileStore at --store-file (a path every
rank sees, fresh for each job) or, under torchrun, env://. Gloo's sockets stay
on loopback (GLOO_SOCKET_IFNAME=lo unless set).

What is timed is what a PyTorch program gets: torch.distributed.all_reduce
of a CPU tensor through ProcessGroupGloo, called from Python (so each op
includes the call's Python and dispatch cost, a few microseconds). Gloo
reduces in place, so every op here is in place. For each size: a barrier,
warm-up ops, a barrier, `iters` back-to-back timed ops; the time is the
maximum over ranks of the per-rank average. With -c 1 one more op on fresh
data is checked element by element against the closed-form result (the
pattern of mpi_allreduce_bench and chorus-bench). Only rank 0 prints.

Exit status: 0 when every checked element was right, 1 when one was not,
2 on bad usage.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_util import parse_bytes  # noqa: E402  (next to this script)

DTYPES = {  # name -> (torch dtype name, bytes, largest exactly representable value)
    "float32": ("float32", 4, 1 << 24),
    "float64": ("float64", 8, 1 << 53),
    "int32": ("int32", 4, (1 << 31) - 1),
    "int64": ("int64", 8, (1 << 63) - 1),
}


def size_arg(text):
    """An argparse type: compare_util.parse_bytes's sizes ('8', '64K', '1G')."""
    try:
        return parse_bytes(text)
    except ValueError:
        raise argparse.ArgumentTypeError("bad size %r" % text) from None


def iters_for(size, iter_bytes, max_iters):
    """bench_common.h's rule: clamp(ceil(iter_bytes / size), 1, max_iters)."""
    size = max(size, 1)
    return max(1, min(max_iters, -(-iter_bytes // size)))


def warmup_for(size, iter_bytes, max_warmup):
    return 0 if max_warmup <= 0 else iters_for(size, iter_bytes // 4, max_warmup)


def sizes(lo, hi, factor):
    size = lo
    while size <= hi:
        yield size
        if size > hi // factor:
            break
        size *= factor


def check_period(limit, ranks):
    """Largest period p (at most 2^20) with n * (p - 1) + n * (n - 1) <= limit:
    every input and every sum of the pattern below is exact in the dtype."""
    return min(1 << 20, limit // ranks - ranks + 2)


def pattern(index, rank, period):
    """Rank `rank`'s input at each element index of the check (an int64 tensor)."""
    return index % period + 2 * rank


def reduced(index, ranks, period):
    """The sum of pattern() over the ranks, in closed form."""
    return ranks * (index % period) + ranks * (ranks - 1)


def wrong_elements(result, index, ranks, period):
    """Elements of an allreduce's result that differ from reduced()."""
    return int((result != reduced(index, ranks, period).to(result.dtype)).sum().item())


def launcher_rank():
    for r, w in (("CHORUS_RANK", "CHORUS_WORLD_SIZE"), ("RANK", "WORLD_SIZE")):
        if r in os.environ and w in os.environ:
            return int(os.environ[r]), int(os.environ[w])
    raise SystemExit("gloo_allreduce_bench: no rank in the environment (run it under chorusrun "
                     "or torchrun)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-b", "--minbytes", type=size_arg, default=size_arg("8"))
    ap.add_argument("-e", "--maxbytes", type=size_arg, default=size_arg("64M"))
    ap.add_argument("-f", "--stepfactor", type=int, default=2)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup_iters", type=int, default=5)
    ap.add_argument("--iter-bytes", type=size_arg, default=size_arg("512M"))
    ap.add_argument("--period-us", type=float, default=0.0,
                    help="start each timed op at the next multiple of this period of the wall "
                    "clock after the previous one ended, and time the ops alone "
                    "(bench/bench_period.h); 0: back to back")
    ap.add_argument("-c", "--check", type=int, choices=(0, 1), default=1)
    ap.add_argument("-d", "--datatype", choices=sorted(DTYPES), default="float32")
    ap.add_argument("-J", "--json", action="store_true")
    ap.add_argument("--store-file", help="the FileStore every rank opens (not under torchrun)")
    args = ap.parse_args()
    if args.stepfactor < 2 or args.minbytes < 1 or args.maxbytes < args.minbytes or \
            args.iters < 1 or args.warmup_iters < 0:
        ap.error("need -f >= 2, 1 <= -b <= -e, -n >= 1, -w >= 0")

    rank, ranks = launcher_rank()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist
    from datetime import timedelta
    timeout = timedelta(seconds=int(os.environ.get("CHORUS_TIMEOUT", "300") or 300))
    if "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ:
        dist.init_process_group("gloo", rank=rank, world_size=ranks, timeout=timeout)
    elif args.store_file:
        dist.init_process_group("gloo", store=dist.FileStore(args.store_file, ranks), rank=rank,
                                world_size=ranks, timeout=timeout)
    else:
        ap.error("--store-file is needed outside torchrun")

    tname, width, limit = DTYPES[args.datatype]
    dtype = getattr(torch, tname)
    period = check_period(limit, ranks)
    if args.check and period < 2:
        ap.error("cannot check %s exactly at %d ranks" % (args.datatype, ranks))
    bus_factor = 2.0 * (ranks - 1) / ranks
    if rank == 0 and not args.json:
        print("# gloo_allreduce_bench: nranks %d, torch %s, dtype %s, sum, in place" %
              (ranks, torch.__version__, args.datatype))
        print("# %10s  %12s  %10s  %8s  %8s  %7s" % ("size", "count", "time", "algbw", "busbw",
                                                    "#wrong"))
    total_wrong, busbw_sum, rows = 0, 0.0, 0
    seen = set()
    for size in sizes(args.minbytes, args.maxbytes, args.stepfactor):
        count = max(1, size // width)
        nbytes = count * width
        if nbytes in seen:
            continue
        seen.add(nbytes)
        iters = iters_for(nbytes, args.iter_bytes, args.iters)
        warmup = warmup_for(nbytes, args.iter_bytes, args.warmup_iters)
        index = torch.arange(count, dtype=torch.int64)
        data = ((index + rank) % 2).to(dtype)  # stays finite over the timed ops
        dist.barrier()
        for _ in range(warmup):
            dist.all_reduce(data)
        dist.barrier()
        if args.period_us > 0:  # bench_period.h's rule: each op timed alone, the sleeps not
            op_seconds = 0.0
            period_ns = max(1, int(args.period_us * 1e3))
            for _ in range(iters):
                # the next multiple of the period of the wall clock
                time.sleep(max(0, (time.time_ns() // period_ns + 1) * period_ns - time.time_ns())
                           * 1e-9)
                start_op = time.monotonic()
                dist.all_reduce(data)
                op_seconds += time.monotonic() - start_op
            avg_us = torch.tensor([op_seconds * 1e6 / iters], dtype=torch.float64)
        else:
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(data)
            avg_us = torch.tensor([(time.perf_counter() - start) * 1e6 / iters],
                                  dtype=torch.float64)
        dist.all_reduce(avg_us, op=dist.ReduceOp.MAX)
        avg_us = avg_us.item()

        wrong = None
        if args.check:
            data = pattern(index, rank, period).to(dtype)
            dist.all_reduce(data)
            bad = torch.tensor([wrong_elements(data, index, ranks, period)], dtype=torch.int64)
            dist.all_reduce(bad)
            wrong = int(bad.item())
            total_wrong += wrong
        algbw = nbytes / (avg_us * 1e-6) / 1e9
        busbw = algbw * bus_factor
        busbw_sum += busbw
        rows += 1
        if rank == 0:
            if args.json:
                print(json.dumps({"collective": "allreduce", "nranks": ranks, "size": nbytes,
                                  "count": count, "type": args.datatype, "redop": "sum",
                                  "algo": "gloo", "root": -1, "inplace": 1, "warmup": warmup,
                                  "iters": iters, "time_us": round(avg_us, 3),
                                  "algbw_gbps": algbw, "busbw_gbps": busbw, "wrong": wrong,
                                  "period_us": args.period_us}))
            else:
                print("  %10d  %12d  %10.2f  %8.3f  %8.3f  %7s" %
                      (nbytes, count, avg_us, algbw, busbw, "N/A" if wrong is None else wrong))
            sys.stdout.flush()
    if rank == 0:
        avg = busbw_sum / rows if rows else 0.0
        if args.json:
            print(json.dumps({"summary": True, "collective": "allreduce", "nranks": ranks,
                              "wrong": total_wrong if args.check else None,
                              "avg_busbw_gbps": avg}))
        else:
            print("# Out of bounds values : %d %s" %
                  (total_wrong, "(not checked)" if not args.check else
                   "FAILED" if total_wrong else "OK"))
            print("# Avg bus bandwidth    : %g" % avg)
        sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()
    return 1 if total_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
