#!/usr/bin/env python3
"""What calling Chorus from Python costs: an 8-byte allreduce through the
Python package (NumPy array, in place) against chorus-bench's C figure (the C
API), side by side in one invocation, --runs times interleaved.

Both are timed alike (bench/bench_common.h's rule): the average of
back-to-back blocking in-place calls on each rank, the largest over the
ranks. Measure on idle cores: with the cores busy every wait pays the
scheduler's wake-up latency (issue "Fast while the CPU computes").

  bench/python_overhead.py --build-dir build --np 2 --transport shm --runs 5

Under chorusrun (CHORUS_RANK set) it is the Python rank itself, printing one
JSON line on rank 0."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def rank_main(args):
    import numpy as np
    import chorus

    comm = chorus.init()
    x = np.ones(args.bytes // 4, np.float32)
    for _ in range(args.warmup):
        comm.allreduce(x)
    comm.barrier()
    start = time.perf_counter()
    for _ in range(args.iters):
        comm.allreduce(x)
    average_us = np.array([(time.perf_counter() - start) / args.iters * 1e6])
    comm.allreduce(average_us, op=chorus.MAX)
    if comm.rank == 0:
        print(json.dumps({"size": args.bytes, "nranks": comm.size, "time_us": float(average_us[0])}), flush=True)
    comm.destroy()


def run_json(command, env):
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stdout}{done.stderr}")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return [row for row in rows if "time_us" in row][-1]


def driver(args):
    build = os.path.abspath(args.build_dir)
    chorusrun = os.path.join(build, "tools", "chorusrun")
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), CHORUS_TRANSPORT=args.transport)
    c_command = [chorusrun, "-np", str(args.np), os.path.join(build, "bench", "chorus-bench"), "allreduce",
                 "-b", str(args.bytes), "-e", str(args.bytes), "-t", args.transport, "-n", str(args.iters),
                 "-w", str(args.warmup), "-i", "1", "-J"]
    py_command = [chorusrun, "-np", str(args.np), sys.executable, os.path.abspath(__file__), "--bytes",
                  str(args.bytes), "--iters", str(args.iters), "--warmup", str(args.warmup)]
    c_times, py_times = [], []
    for _ in range(args.runs):
        c_times.append(run_json(c_command, env)["time_us"])
        py_times.append(run_json(py_command, env)["time_us"])
    c_median, py_median = statistics.median(c_times), statistics.median(py_times)
    print(f"{args.bytes}-byte allreduce, {args.np} ranks, {args.transport}, median of {args.runs} runs "
          f"({args.iters} calls each):")
    print(f"  C (chorus-bench)  {c_median:8.3f} us   runs: {', '.join(f'{t:.3f}' for t in c_times)}")
    print(f"  Python (NumPy)    {py_median:8.3f} us   runs: {', '.join(f'{t:.3f}' for t in py_times)}")
    print(f"  Python - C        {py_median - c_median:8.3f} us   (ratio {py_median / c_median:.2f})")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--transport", default="shm")
    parser.add_argument("--bytes", type=int, default=8)
    parser.add_argument("--iters", type=int, default=20000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if "CHORUS_RANK" in os.environ:
        rank_main(args)
    else:
        driver(args)


if __name__ == "__main__":
    main()
