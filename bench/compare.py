#!/usr/bin/env python3
"""Chorus vs Open MPI allreduce, side by side, in one invocation.

For each rank count it runs, --runs times and interleaved (so drift in the
machine's speed hits every configuration alike):

  chorus      chorusrun -np N chorus-bench allreduce -t <transport> --json ...
  ompi        mpirun -np N <class MCA flags> mpi_allreduce_bench --json ...
              (Open MPI as installed)
  ompi-tuned  the same with -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:
              glibc.malloc.trim_threshold=68719476736 (keeps malloc from
              handing large buffers back to the kernel, Open MPI's stronger
              configuration on these machines)

All three use the same sizes, the same iteration rule (bench/bench_common.h),
the same timing (max over ranks of the per-rank average of back-to-back ops)
and the same element-by-element check. The table shows medians over the runs
and the ratio chorus / max(ompi, ompi-tuned) of bus bandwidth, and, when
chorus-bench reports it, Chorus's busbw as a percentage of the machine's
single-thread memcpy bandwidth at that size (its %limit column).

Transport classes (--transport-class): tcp (Chorus -t tcp; Open MPI btl
tcp,self on lo) and shm (Chorus -t shm; Open MPI pml ob1, btl vader,self).
Before the runs a one-size probe checks that chorus-bench accepts the class's
transport; when it does not (a Chorus without shared memory rejects -t shm),
Chorus falls back to -t tcp with a message saying so, or, with
--strict-transport, the script stops.

  bench/compare.py --build-dir build-release --np 2,4 --min 8 --max 256M --runs 3
  bench/compare.py --transport-class shm --np 2 --runs 3

--fusion runs the tensor-fusion comparison instead (docs/benchmarks.md,
"Tensor fusion"): per rank count and --runs times, interleaved,

  chorus      chorusrun -np N chorus-bench fusion -t <transport> --json ...
              (modes fused, per_tensor, single_buffer)
  ompi        mpirun -np N <class MCA flags> mpi_allreduce_bench fusion --json ...
              (modes per_tensor, single_buffer)
  ompi-tuned  the same with the GLIBC_TUNABLES above

on the same tensors (--tensors N --bytes-each B, or --mix resnet50), and
prints the median step time per mode and configuration (then the same of
the runs' mean step times) and the ratios of Chorus's fused step to
per_tensor and single_buffer (Chorus's own and the better Open MPI's). When chorus-bench has no fusion mode (or is not built),
a one-step probe says so and only Open MPI runs.

  bench/compare.py --fusion --np 2 --mix resnet50 --runs 3

--load KIND[:WORKERS] runs CPU load (chorus-load: spin or float32 matmul, in
WORKERS unbound threads, default one per CPU) beside every invocation, the
same for every configuration (bench/load_beside.py), and prints per
configuration the load's work per second beside it as a fraction of the
load alone:

  bench/compare.py --transport-class shm --np 2 --load spin --runs 3

--gloo adds PyTorch's gloo allreduce to the sweep (and to --load's runs):

  gloo        chorusrun -np N --bind-to none python3 gloo_allreduce_bench.py ...
              (torch.distributed.all_reduce over ProcessGroupGloo, loopback
              TCP in either class, ranks unbound as torchrun leaves them,
              OMP_NUM_THREADS=1 as torchrun sets it; in place, called from
              Python, so each op includes a few microseconds of Python)

with its own busbw and time columns and Chorus's busbw over Gloo's (vs gloo).

  bench/compare.py --transport-class tcp --np 2 --load spin --gloo --runs 3

Standard library only (the Gloo side needs torch). Exit status: 0 when every run succeeded and every
element checked was right, 1 on wrong results, 2 on a failed run or bad usage.
"""
import argparse
import itertools
import math
import os
import shlex
import signal
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_util import (CONFIGS, TUNED_ENV, default_build_dir, finish, fmt_bytes,  # noqa: E402
                          fmt_us, median_or_none, parse_bytes, print_load, run_beside, run_one)

# Transport classes: how each side is told to use the same kind of link.
# A class maps to Chorus's -t and to Open MPI's PML/BTL selection.
# chorus_fallback: the -t Chorus runs with when chorus-bench rejects
# chorus_transport (None: no fallback, the runs fail).
TRANSPORT_CLASSES = {
    "tcp": {
        "enabled": True,
        "chorus_transport": "tcp",
        "chorus_fallback": None,
        "mpi_args": ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
                     "--mca", "pml", "ob1"],
    },
    "shm": {
        "enabled": True,
        "chorus_transport": "shm",
        "chorus_fallback": "tcp",
        "mpi_args": ["--mca", "pml", "ob1", "--mca", "btl", "vader,self"],
    },
}


def probe_chorus_transport(chorusrun, chorus_bench, transport, n, timeout, verbose):
    """Runs one tiny checked allreduce with -t transport; returns None when it
    worked, else the last lines it printed (why chorus-bench refused)."""
    cmd = [chorusrun, "-np", str(n), "--timeout", str(timeout), chorus_bench, "allreduce",
           "-t", transport, "-b", "8", "-e", "8", "-n", "1", "-w", "0", "-c", "1", "--json"]
    if verbose:
        print("+ " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr, flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            process_group=0)
    try:
        out, err = proc.communicate(timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        return "the probe timed out after %ds" % (timeout + 30)
    if proc.returncode == 0 and any('"summary": true' in line for line in out.splitlines()):
        return None
    lines = []
    for x in (err or out).strip().splitlines():  # every rank says it: once is enough
        if x.strip() and x not in lines:
            lines.append(x)
    # The line naming the cause (chorus_init_from_env's error) first, if any.
    cause = [x for x in lines if "transport" in x.lower()]
    return "; ".join((cause or lines)[-2:]) or "exit status %d" % proc.returncode


def probe_gloo(python, gloo_bench):
    """torch's version when `python` has torch.distributed with gloo and
    gloo_bench exists; else None, after saying why."""
    if not os.path.exists(gloo_bench):
        print("compare.py: --gloo: %s not found" % gloo_bench, file=sys.stderr)
        return None
    code = ("import torch, torch.distributed as d; "
            "assert d.is_available() and d.is_gloo_available(), 'no gloo'; print(torch.__version__)")
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120,
                          check=False)
    if proc.returncode != 0:
        print("compare.py: --gloo: %s has no torch with gloo (%s)" %
              (python, (proc.stderr.strip().splitlines() or ["?"])[-1]), file=sys.stderr)
        return None
    return proc.stdout.strip()


def print_sweep(args, n, configs, med, sizes, tclass, chorus_transport, fallback_note):
    """The table of one rank count: busbw per configuration, Chorus's ratio to
    the better Open MPI (and to Gloo when it ran), times, latency, means."""
    ompis = [k for k in configs if k.startswith("ompi")]
    gloo = "gloo" in configs
    # chorus-bench's %limit (busbw / single-thread memcpy at the size), when it has one.
    show_limit = any(med["chorus"][s]["pct_limit"] is not None for s in sizes)
    print()
    print("## allreduce %s, %d ranks, transport class %s (Chorus -t %s%s; Open MPI %s%s)" %
          (args.dtype, n, args.transport_class, chorus_transport,
           " FALLBACK, -t %s rejected" % tclass["chorus_transport"] if fallback_note else "",
           " ".join(tclass["mpi_args"]),
           "; Gloo: torch %s over loopback TCP, unbound" % args.gloo_version if gloo else ""))
    print("## busbw = algbw * 2(n-1)/n, GB/s; medians of %d runs; ratio = chorus / max(ompi)"
          % args.runs + ("; vs gloo = chorus / gloo" if gloo else "") +
          ("; %limit = chorus busbw / single-thread memcpy GB/s at the size" if show_limit else ""))
    head = ["size", "chorus"] + ompis + (["gloo"] if gloo else []) + ["ratio"] + \
        (["vs gloo"] if gloo else []) + ["chorus", "ompi(best)"] + (["gloo"] if gloo else [])
    unit = ["(B)"] + ["busbw"] * (len(ompis) + 1 + gloo) + [""] * (1 + gloo) + \
        ["time(us)"] * (2 + gloo)
    if show_limit:
        head.append("chorus")
        unit.append("%limit")
    fmt = "%10s " + " ".join(["%11s"] * (len(head) - 1))
    print(fmt % tuple(head))
    print(fmt % tuple(unit))

    def f(v, spec="%.3f"):
        return "-" if v is None else spec % v

    def ratio_of(a, b):
        return a / b if a and b else None
    ratios, big_ratios = [], []
    for s in sizes:
        c = med["chorus"][s]
        o = [med[k][s] for k in ompis]
        best_bw = max([x["busbw"] for x in o if x["busbw"] is not None], default=None)
        best_t = min([x["time"] for x in o if x["time"] is not None], default=None)
        ratio = ratio_of(c["busbw"], best_bw)
        if ratio:
            ratios.append(ratio)
            if s >= 1 << 20:
                big_ratios.append(ratio)
        g = med["gloo"][s] if gloo else None
        cells = [fmt_bytes(s), f(c["busbw"])] + [f(x["busbw"]) for x in o] + \
            ([f(g["busbw"])] if gloo else []) + [f(ratio, "%.2f")] + \
            ([f(ratio_of(c["busbw"], g["busbw"]), "%.2f")] if gloo else []) + \
            [fmt_us(c["time"]), fmt_us(best_t)] + ([fmt_us(g["time"])] if gloo else [])
        if show_limit:
            cells.append(f(c["pct_limit"], "%.2f"))
        print(fmt % tuple(cells))
    if sizes:
        lat = ", ".join("%s %s us" % (k, fmt_us(med[k][sizes[0]]["time"])) for k in configs)
        print("## %s-byte latency (median time per op): %s" % (fmt_bytes(sizes[0]), lat))
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        line = "## geometric mean of ratio: %.2f over all sizes" % geo
        if big_ratios:
            line += ", %.2f over sizes >= 1M" % math.exp(
                sum(math.log(x) for x in big_ratios) / len(big_ratios))
        print(line)


def main():
    classes = sorted(k for k, v in TRANSPORT_CLASSES.items() if v["enabled"])
    ap = argparse.ArgumentParser(
        description="Chorus vs Open MPI allreduce on the same sizes, in one run.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--build-dir", default=default_build_dir(),
                    help="meson build directory holding tools/chorusrun and bench/*")
    ap.add_argument("--chorusrun", help="path of chorusrun (default BUILD/tools/chorusrun)")
    ap.add_argument("--chorus-bench", help="path of chorus-bench (default BUILD/bench/chorus-bench)")
    ap.add_argument("--mpi-bench",
                    help="path of mpi_allreduce_bench (default BUILD/bench/mpi_allreduce_bench)")
    ap.add_argument("--mpirun", default="mpirun", help="Open MPI's launcher")
    ap.add_argument("--np", default=None,
                    help="rank counts, comma separated (e.g. 2,4); repeatable (default 2)",
                    action="append")
    ap.add_argument("--min", default="8", help="smallest size in bytes (K/M/G)")
    ap.add_argument("--max", default="256M", help="largest size in bytes (K/M/G)")
    ap.add_argument("--factor", type=int, default=2, help="size step factor")
    ap.add_argument("--runs", type=int, default=3, help="runs per configuration (medians)")
    ap.add_argument("--iters", type=int, default=20, help="timed ops per size (-n), capped")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up ops per size (-w), capped")
    ap.add_argument("--iter-bytes", default="512M",
                    help="at most this many timed bytes per size: iters = "
                         "clamp(ceil(B/size), 1, --iters)")
    ap.add_argument("--period-us", type=float, default=0.0,
                    help="every benchmark runs one timed op per period of this many microseconds "
                    "(a training step's rate; with --load, the load then meets the same "
                    "collectives per second beside each library); 0: back to back")
    ap.add_argument("--check", type=int, choices=(0, 1), default=1,
                    help="check every element of one extra op per size")
    ap.add_argument("--dtype", default="float32", help="float32, float64, int32 or int64")
    ap.add_argument("--transport-class", default="tcp", choices=classes,
                    help="which links both sides use: tcp (Chorus -t tcp; Open MPI btl tcp,self "
                         "on lo) or shm (Chorus -t shm; Open MPI pml ob1, btl vader,self)")
    ap.add_argument("--strict-transport", action="store_true",
                    help="stop (exit 2) instead of falling back when chorus-bench rejects the "
                         "class's transport (e.g. -t shm before Chorus has shared memory)")
    ap.add_argument("--no-limit", action="store_true",
                    help="pass --no-limit to chorus-bench: no memcpy measurement, no %%limit "
                         "column")
    ap.add_argument("--chorus-args", default="",
                    help="extra chorus-bench arguments, one shell-quoted string "
                         "(e.g. '--sync allreduce')")
    ap.add_argument("--chorusrun-args", default="",
                    help="extra chorusrun arguments, one shell-quoted string "
                         "(e.g. '--bind-to core')")
    ap.add_argument("--mpirun-args", default="",
                    help="extra mpirun arguments, one shell-quoted string")
    ap.add_argument("--skip-tuned", action="store_true", help="skip the GLIBC_TUNABLES run")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per benchmark invocation")
    ap.add_argument("--json-out", help="also write every run and the medians to this file "
                    "(bench/plot.py reads it)")
    ap.add_argument("--fusion", action="store_true",
                    help="the tensor-fusion comparison (chorus-bench fusion against "
                         "mpi_allreduce_bench fusion) instead of the allreduce sweep")
    ap.add_argument("--tensors", type=int, default=1000, help="--fusion: tensors per step (-N)")
    ap.add_argument("--bytes-each", default="4K", help="--fusion: bytes of each tensor (-b)")
    ap.add_argument("--mix", help="--fusion: a named mix of tensor sizes instead of --tensors "
                                  "and --bytes-each (resnet50, bert-base: bench/fusion_mixes.h)")
    ap.add_argument("--load", metavar="KIND[:WORKERS]",
                    help="CPU load beside every run: spin or matmul, in WORKERS threads "
                         "(default: one per CPU); see bench/load_beside.py")
    ap.add_argument("--chorus-load", help="the chorus-load binary (default: "
                                          "<build-dir>/bench/chorus-load)")
    ap.add_argument("--gloo", action="store_true",
                    help="also run PyTorch's gloo allreduce (bench/gloo_allreduce_bench.py under "
                         "chorusrun --bind-to none, loopback TCP) in either class")
    ap.add_argument("--gloo-bench", default=os.path.join(HERE, "gloo_allreduce_bench.py"),
                    help="path of gloo_allreduce_bench.py")
    ap.add_argument("--python", default=sys.executable,
                    help="the Python with torch that runs the Gloo side")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each command")
    args = ap.parse_args()

    nps = []
    for item in args.np or ["2"]:
        nps += [int(x) for x in item.split(",") if x.strip()]
    build = args.build_dir
    chorusrun = args.chorusrun or os.path.join(build, "tools", "chorusrun")
    chorus_bench = args.chorus_bench or os.path.join(build, "bench", "chorus-bench")
    mpi_bench = args.mpi_bench or os.path.join(build, "bench", "mpi_allreduce_bench")
    chorus_missing = None  # --fusion runs Open MPI alone when Chorus is not there
    for path, what in ((chorusrun, "chorusrun"), (chorus_bench, "chorus-bench"),
                       (mpi_bench, "mpi_allreduce_bench")):
        if not os.access(path, os.X_OK):
            if args.fusion and what != "mpi_allreduce_bench":
                chorus_missing = chorus_missing or "%s not found at %s" % (what, path)
                continue
            print("compare.py: %s not found at %s (build it, or give --build-dir / --%s)"
                  % (what, path, what.replace("_", "-").replace("allreduce-", "")),
                  file=sys.stderr)
            return 2
    try:
        lo, hi = parse_bytes(args.min), parse_bytes(args.max)
        parse_bytes(args.iter_bytes)
    except ValueError:
        print("compare.py: bad --min/--max/--iter-bytes", file=sys.stderr)
        return 2
    load = None
    if args.load:
        try:
            from load_beside import LoadBeside  # next to this script
            load = LoadBeside(args.chorus_load or os.path.join(build, "bench", "chorus-load"),
                              args.load)
        except (ImportError, OSError, RuntimeError, ValueError) as e:
            print("compare.py: --load: %s" % e, file=sys.stderr)
            return 2
        print("compare.py: load beside every run: " + load.describe(), file=sys.stderr,
              flush=True)
    tclass = TRANSPORT_CLASSES[args.transport_class]
    common = ["-b", str(lo), "-e", str(hi), "-f", str(args.factor), "-n", str(args.iters),
              "-w", str(args.warmup), "--iter-bytes", args.iter_bytes, "-c", str(args.check),
              "-d", args.dtype, "--json"] + \
        (["--period-us", "%g" % args.period_us] if args.period_us > 0 else [])
    mpirun_base = [args.mpirun, "--allow-run-as-root", "--oversubscribe"]
    configs = [c for c in CONFIGS if not (args.skip_tuned and c == "ompi-tuned")]
    if args.fusion and args.period_us > 0:
        print("compare.py: --period-us paces the allreduce sweep, not --fusion", file=sys.stderr)
        return 2
    if args.gloo:
        if args.fusion:
            print("compare.py: --gloo compares the allreduce sweep, not --fusion",
                  file=sys.stderr)
            return 2
        args.gloo_version = probe_gloo(args.python, args.gloo_bench)
        if args.gloo_version is None:
            return 2
        configs.append("gloo")

    # Does chorus-bench take this class's transport? (-t shm needs a Chorus with
    # shared memory.) If not, fall back to the class's fallback and say so.
    chorus_transport = tclass["chorus_transport"]
    fallback_note = None
    if tclass.get("chorus_fallback") and not chorus_missing:
        why = probe_chorus_transport(chorusrun, chorus_bench, chorus_transport, min(nps),
                                     min(args.timeout, 120), args.verbose)
        if why is not None:
            if args.strict_transport:
                print("compare.py: chorus-bench rejected -t %s (%s); stopping "
                      "(--strict-transport)" % (chorus_transport, why), file=sys.stderr)
                return 2
            fallback_note = ("chorus-bench rejected -t %s (%s): Chorus runs with -t %s "
                             "instead, while Open MPI uses %s, so this is NOT a like-for-like "
                             "%s comparison" % (chorus_transport, why, tclass["chorus_fallback"],
                                                " ".join(tclass["mpi_args"]),
                                                args.transport_class))
            chorus_transport = tclass["chorus_fallback"]
            print("compare.py: " + fallback_note, file=sys.stderr, flush=True)
    if args.fusion:
        from compare_fusion import run_fusion
        return run_fusion(args, nps, chorusrun, chorus_bench, mpi_bench, chorus_transport, tclass,
                          fallback_note, chorus_missing, mpirun_base, load)
    chorus_extra = (["--no-limit"] if args.no_limit else []) + shlex.split(args.chorus_args)

    def command(config, n):
        if config == "chorus":
            return [chorusrun, "-np", str(n), "--timeout", str(args.timeout)] + \
                shlex.split(args.chorusrun_args) + [chorus_bench, "allreduce", "-t",
                                                    chorus_transport] + common + chorus_extra
        if config == "gloo":
            # torchrun leaves ranks unbound: so does this launch.
            return [chorusrun, "-np", str(n), "--timeout", str(args.timeout), "--bind-to",
                    "none", args.python, args.gloo_bench, "--store-file",
                    os.path.join(store_dir, "store-%d" % next(store_ids))] + common
        extra = ["-x", TUNED_ENV] if config == "ompi-tuned" else []
        return mpirun_base + ["-np", str(n)] + tclass["mpi_args"] + extra + \
            shlex.split(args.mpirun_args) + [mpi_bench] + common

    # Gloo's side: one thread per rank for torch's own kernels (torchrun's
    # default with several ranks per host), sockets on loopback.
    gloo_env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    store_dir = tempfile.mkdtemp(prefix="compare-gloo-")  # a fresh FileStore per Gloo job
    store_ids = itertools.count()
    try:
        return run_sweep(args, nps, configs, command, gloo_env, load, tclass, chorus_transport,
                         fallback_note)
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)


def run_sweep(args, nps, configs, command, gloo_env, load, tclass, chorus_transport,
              fallback_note):
    """The allreduce sweep: every configuration --runs times per rank count,
    interleaved; prints a table per rank count; returns the exit status."""
    failures, wrong_total = [], 0
    report = {"args": vars(args), "chorus_transport": chorus_transport,
              "transport_fallback": fallback_note, "results": {}}
    started = time.monotonic()
    for n in nps:
        # runs[config][size] -> list of rows
        runs = {c: {} for c in configs}
        loads = []  # 1-minute load average before and after each invocation
        for r in range(args.runs):
            for config in configs:
                print("# np=%d run %d/%d %s ..." % (n, r + 1, args.runs, config), file=sys.stderr,
                      flush=True)
                loads.append(os.getloadavg()[0])
                rows, summary, error = run_beside(load, (n, config), run_one,
                                                  command(config, n), args.timeout + 30,
                                                  args.verbose,
                                                  env=gloo_env if config == "gloo" else None)
                loads.append(os.getloadavg()[0])
                if error:
                    failures.append("np=%d %s run %d: %s" % (n, config, r + 1, error))
                    print("compare.py: " + failures[-1], file=sys.stderr, flush=True)
                for row in rows or []:
                    row["config"], row["run"] = config, r + 1  # for --json-out readers (plot.py)
                    runs[config].setdefault(row["size"], []).append(row)
                    if row.get("wrong"):
                        wrong_total += row["wrong"]
                        failures.append("np=%d %s run %d: %d wrong elements at %d B" %
                                        (n, config, r + 1, row["wrong"], row["size"]))
        sizes = sorted(set().union(*[set(runs[c]) for c in configs]))
        med = {c: {s: {"busbw": median_or_none([x["busbw_gbps"] for x in runs[c].get(s, [])]),
                       "time": median_or_none([x["time_us"] for x in runs[c].get(s, [])]),
                       "pct_limit": median_or_none([x.get("pct_limit")
                                                    for x in runs[c].get(s, [])]),
                       "n": len(runs[c].get(s, []))} for s in sizes} for c in configs}
        report["results"][str(n)] = {"runs": runs, "medians": med, "loadavg": loads}
        print_sweep(args, n, configs, med, sizes, tclass, chorus_transport, fallback_note)
        print("## 1-min load average: %.1f before the first run, %.1f..%.1f around the runs "
              "(%d CPUs; the load includes the benchmark's own %d ranks: anything well above "
              "that means other work competed)" %
              (loads[0], min(loads), max(loads), os.cpu_count() or 1, n))
        print_load(load, n, configs, report)
        sys.stdout.flush()

    print("\n# compare.py: %.0fs, %s" % (time.monotonic() - started,
                                        "all runs OK, every element right" if not failures
                                        else "%d problem(s):" % len(failures)))
    if fallback_note:
        print("# note: " + fallback_note)
    return finish(failures, report, wrong_total, args.json_out)


if __name__ == "__main__":
    sys.exit(main())
