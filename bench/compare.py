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
prints the median step time per mode and configuration and the ratios of
Chorus's fused step to per_tensor and single_buffer (Chorus's own and the
better Open MPI's). When chorus-bench has no fusion mode (or is not built),
a one-step probe says so and only Open MPI runs.

  bench/compare.py --fusion --np 2 --mix resnet50 --runs 3

--load KIND[:WORKERS] runs CPU load (chorus-load: spin or float32 matmul, in
WORKERS unbound threads, default one per CPU) beside every invocation, the
same for every configuration (bench/load_beside.py), and prints per
configuration the load's work per second beside it as a fraction of the
load alone:

  bench/compare.py --transport-class shm --np 2 --load spin --runs 3

Standard library only. Exit status: 0 when every run succeeded and every
element checked was right, 1 on wrong results, 2 on a failed run or bad usage.
"""
import argparse
import json
import math
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

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

TUNED_ENV = "GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736"
CONFIGS = ("chorus", "ompi", "ompi-tuned")


def parse_bytes(text):
    """'8', '64K', '256M', '1G', '1GiB': binary multiples, as chorus-bench."""
    m = re.fullmatch(r"(\d+)([KMGT]?)(I?B)?", text.strip().upper())
    if not m:
        raise ValueError(text)
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2)]


def default_build_dir():
    # The copy meson places in <build>/bench/ finds its own build directory.
    if os.path.exists(os.path.join(HERE, "chorus-bench")):
        return os.path.dirname(HERE)
    return os.path.join(os.path.dirname(HERE), "build-release")


def fmt_bytes(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)


def fmt_us(t):
    """Microseconds: two decimals below 10 us (latencies of a few tenths), else one."""
    if t is None:
        return "-"
    return "%.2f" % t if t < 10 else "%.1f" % t


def run_one(cmd, timeout, verbose, env=None, require_summary=True):
    """Runs cmd in its own process group; returns (rows, summary, error).
    require_summary=False: a run that exits 0 or 1 with rows but no summary
    line is not an error (the fusion contract makes the summary optional)."""
    if verbose:
        print("+ " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr, flush=True)
    start = time.monotonic()
    # A process group of its own (killpg on timeout), but not a session of its
    # own: with the kernel's autogroup scheduling a new session is a new
    # scheduling group, which would shield the run from a --load running in
    # this one (measured: 8-byte shm allreduce under two spinning processes,
    # 0.6 us in a session of its own against 2 ms beside them; a framework's
    # compute threads share the collective's process, and so its group).
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            process_group=0, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        return None, None, "timed out after %ds" % timeout
    rows, summary = [], None
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if obj.get("summary"):
            summary = obj
        else:
            rows.append(obj)
    if verbose:
        print("  (%.1fs, exit %d)" % (time.monotonic() - start, proc.returncode), file=sys.stderr,
              flush=True)
    if proc.returncode not in (0, 1) or (summary is None and (require_summary or not rows)):
        tail = "\n".join((err or out).strip().splitlines()[-15:])
        return rows, summary, "exit status %d\n%s" % (proc.returncode, tail)
    return rows, summary, None


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


def condense(text, keep=2):
    """The last `keep` distinct non-empty lines of text (every rank says the
    same thing: once is enough), the lines naming a cause first, joined."""
    lines = []
    for x in (text or "").strip().splitlines():
        if x.strip() and x not in lines and not x.startswith("---"):
            lines.append(x.strip())
    cause = [x for x in lines if "error" in x.lower() or "unknown" in x.lower()
             or "not " in x.lower() or "invalid" in x.lower()]
    return "; ".join((cause or lines)[-keep:])


def probe_chorus_fusion(chorusrun, chorus_bench, transport, n, timeout, verbose):
    """Runs one tiny checked fusion step through chorus-bench; returns None
    when it printed fusion rows (objects with "mode"), else why not."""
    cmd = [chorusrun, "-np", str(n), "--timeout", str(timeout), chorus_bench, "fusion",
           "-t", transport, "-N", "2", "-b", "64", "-n", "1", "-w", "0", "-c", "1", "--json"]
    rows, _, error = run_one(cmd, timeout + 30, verbose, require_summary=False)
    if error:
        first, _, rest = error.partition("\n")
        return condense(rest) or first
    if not any("mode" in r and "step_us" in r for r in rows):
        return "it printed no fusion rows (JSON objects with \"mode\" and \"step_us\")"
    return None


FUSION_MODES = ("fused", "per_tensor", "single_buffer")


def run_fusion(args, nps, chorusrun, chorus_bench, mpi_bench, chorus_transport, tclass,
               fallback_note, chorus_missing, mpirun_base, load=None):
    """--fusion: chorus-bench fusion against mpi_allreduce_bench fusion."""
    if args.mix:
        shape = ["--mix", args.mix]
        what = "mix %s" % args.mix
    else:
        try:
            each = parse_bytes(args.bytes_each)
        except ValueError:
            print("compare.py: bad --bytes-each", file=sys.stderr)
            return 2
        if args.tensors < 1 or each < 4:
            print("compare.py: --tensors must be >= 1 and --bytes-each >= 4", file=sys.stderr)
            return 2
        shape = ["-N", str(args.tensors), "-b", str(each)]
        what = "%d tensors of %s" % (args.tensors, fmt_bytes(each))
    common = shape + ["-n", str(args.iters), "-w", str(args.warmup), "--iter-bytes",
                      args.iter_bytes, "-c", str(args.check), "--json"]

    chorus_note = None
    if chorus_missing:
        chorus_note = chorus_missing
    else:
        why = probe_chorus_fusion(chorusrun, chorus_bench, chorus_transport, min(nps),
                                  min(args.timeout, 120), args.verbose)
        if why is not None:
            chorus_note = "chorus-bench has no usable fusion mode (%s)" % why
    if chorus_note:
        chorus_note += ": Open MPI only, no fused mode and no fused ratios"
        print("compare.py: " + chorus_note, file=sys.stderr, flush=True)
    configs = [c for c in CONFIGS if not (c == "chorus" and chorus_note)
               and not (args.skip_tuned and c == "ompi-tuned")]

    def command(config, n):
        if config == "chorus":
            return [chorusrun, "-np", str(n), "--timeout", str(args.timeout)] + \
                shlex.split(args.chorusrun_args) + [chorus_bench, "fusion", "-t",
                                                    chorus_transport] + common + \
                shlex.split(args.chorus_args)
        extra = ["-x", TUNED_ENV] if config == "ompi-tuned" else []
        return mpirun_base + ["-np", str(n)] + tclass["mpi_args"] + extra + \
            shlex.split(args.mpirun_args) + [mpi_bench, "fusion"] + common

    failures, wrong_total = [], 0
    report = {"args": vars(args), "fusion": True, "chorus_transport": chorus_transport,
              "transport_fallback": fallback_note, "chorus_note": chorus_note, "results": {}}
    started = time.monotonic()
    for n in nps:
        runs = {c: [] for c in configs}  # config -> rows (one per mode and run)
        loads = []
        for r in range(args.runs):
            for config in configs:
                print("# np=%d run %d/%d %s fusion ..." % (n, r + 1, args.runs, config),
                      file=sys.stderr, flush=True)
                loads.append(os.getloadavg()[0])
                rows, _, error = run_beside(load, (n, config), run_one, command(config, n),
                                            args.timeout + 30, args.verbose,
                                            require_summary=False)
                loads.append(os.getloadavg()[0])
                if error:
                    failures.append("np=%d %s run %d: %s" % (n, config, r + 1, error))
                    print("compare.py: " + failures[-1], file=sys.stderr, flush=True)
                for row in rows or []:
                    if not isinstance(row.get("mode"), str) or \
                            not isinstance(row.get("step_us"), (int, float)):
                        failures.append("np=%d %s run %d: a row without mode/step_us: %s" %
                                        (n, config, r + 1, json.dumps(row)[:200]))
                        continue
                    row["config"], row["run"] = config, r + 1
                    runs[config].append(row)
                    if row.get("wrong"):
                        wrong_total += row["wrong"]
                        failures.append("np=%d %s run %d: %d wrong elements in mode %s" %
                                        (n, config, r + 1, row["wrong"], row["mode"]))
        modes = [m for m in FUSION_MODES if any(x["mode"] == m for c in configs
                                                 for x in runs[c])]
        modes += sorted({x["mode"] for c in configs for x in runs[c]} - set(modes))
        med = {c: {m: median_or_none([x["step_us"] for x in runs[c] if x["mode"] == m])
                   for m in modes} for c in configs}
        report["results"][str(n)] = {"runs": runs, "medians": med, "loadavg": loads}
        first = next((x for c in configs for x in runs[c]), {})

        print()
        print("## tensor fusion, %d ranks: %s (%s tensors, %s bytes per step), float32 sum; "
              "transport class %s (Chorus -t %s%s; Open MPI %s)" %
              (n, what, first.get("tensors", "?"), first.get("bytes", "?"),
               args.transport_class, chorus_transport,
               " FALLBACK, -t %s rejected" % tclass["chorus_transport"] if fallback_note else "",
               " ".join(tclass["mpi_args"])))
        print("## median step time in us (per run: the max over ranks of each rank's median "
              "step); medians of %d runs" % args.runs)
        fmt = "%13s " + " ".join(["%11s"] * len(configs))
        print(fmt % (("mode",) + tuple(configs)))
        for m in modes:
            print(fmt % ((m,) + tuple(fmt_us(med[c][m]) for c in configs)))

        def ratio(a, b):
            return "%.2f" % (a / b) if a and b else "-"
        fused = med.get("chorus", {}).get("fused")
        for base in ("per_tensor", "single_buffer") if fused else ():
            best_ompi = min([med[c][base] for c in configs
                             if c != "chorus" and med[c].get(base) is not None], default=None)
            print("## fused / %s: %s (Chorus's %s), %s (the better Open MPI %s)%s" %
                  (base, ratio(fused, med.get("chorus", {}).get(base)), base,
                   ratio(fused, best_ompi), base, "; below 1: fused is faster"))
        if not fused:
            print("## no fused ratios: no Chorus fused runs" +
                  (" (%s)" % chorus_note if chorus_note else ""))
        print("## 1-min load average: %.1f before the first run, %.1f..%.1f around the runs "
              "(%d CPUs, %d ranks)" % (loads[0], min(loads), max(loads), os.cpu_count() or 1, n))
        print_load(load, n, configs, report)
        sys.stdout.flush()

    print("\n# compare.py --fusion: %.0fs, %s" %
          (time.monotonic() - started, "all runs OK, every element right" if not failures
           else "%d problem(s):" % len(failures)))
    for note in (fallback_note, chorus_note):
        if note:
            print("# note: " + note)
    return finish(failures, report, wrong_total, args.json_out)


def run_beside(load, key, fn, *args, **kwargs):
    """fn(*args, **kwargs), with --load's load beside it when there is one."""
    return load.run(key, fn, *args, **kwargs) if load else fn(*args, **kwargs)


def print_load(load, n, configs, report):
    """The line saying what the load got done beside each configuration."""
    if not load:
        return
    cells = []
    for c in configs:
        f = load.fraction((n, c))
        cells.append("%s %s" % (c, "-" if f is None else "%.2f" % f))
    print("## load beside every run: %s; its work per second beside each configuration as a "
          "fraction of alone (median of runs): %s" % (load.describe(), ", ".join(cells)))
    report.setdefault("load", {"kind": load.kind, "workers": load.workers, "alone": load.alone,
                               "fractions": {}})
    for c in configs:
        report["load"]["fractions"]["%d/%s" % (n, c)] = load.fractions((n, c))


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def finish(failures, report, wrong_total, json_out):
    """Prints the failed runs (their last lines), saves the report, and
    returns the exit status: 1 on wrong elements, 2 on a failed run."""
    for f_ in failures:
        lines = f_.splitlines()
        print("#   " + lines[0])
        for line in lines[1:][-3:]:  # the last lines the failed run printed
            print("#       " + line[:300])
    if json_out:
        with open(json_out, "w") as fh:
            json.dump(report, fh, indent=1)
    if wrong_total:
        return 1
    return 2 if failures else 0


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
              "-d", args.dtype, "--json"]
    mpirun_base = [args.mpirun, "--allow-run-as-root", "--oversubscribe"]
    configs = [c for c in CONFIGS if not (args.skip_tuned and c == "ompi-tuned")]

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
        return run_fusion(args, nps, chorusrun, chorus_bench, mpi_bench, chorus_transport, tclass,
                          fallback_note, chorus_missing, mpirun_base, load)
    chorus_extra = (["--no-limit"] if args.no_limit else []) + shlex.split(args.chorus_args)

    def command(config, n):
        if config == "chorus":
            return [chorusrun, "-np", str(n), "--timeout", str(args.timeout)] + \
                shlex.split(args.chorusrun_args) + [chorus_bench, "allreduce", "-t",
                                                    chorus_transport] + common + chorus_extra
        extra = ["-x", TUNED_ENV] if config == "ompi-tuned" else []
        return mpirun_base + ["-np", str(n)] + tclass["mpi_args"] + extra + \
            shlex.split(args.mpirun_args) + [mpi_bench] + common

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
                                                  args.verbose)
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
        # chorus-bench's %limit (busbw / single-thread memcpy at the size), when it has one.
        show_limit = any(med["chorus"][s]["pct_limit"] is not None for s in sizes)
        report["results"][str(n)] = {"runs": runs, "medians": med, "loadavg": loads}

        print()
        print("## allreduce %s, %d ranks, transport class %s (Chorus -t %s%s; Open MPI %s)" %
              (args.dtype, n, args.transport_class, chorus_transport,
               " FALLBACK, -t %s rejected" % tclass["chorus_transport"] if fallback_note else "",
               " ".join(tclass["mpi_args"])))
        print("## busbw = algbw * 2(n-1)/n, GB/s; medians of %d runs; ratio = chorus / max(ompi)"
              % args.runs + ("; %limit = chorus busbw / single-thread memcpy GB/s at the size"
                             if show_limit else ""))
        head = ["size", "chorus", "ompi", "ompi-tuned", "ratio", "chorus", "ompi(best)"]
        unit = ["(B)", "busbw", "busbw", "busbw", "", "time(us)", "time(us)"]
        if "ompi-tuned" not in configs:
            del head[3], unit[3]
        if show_limit:
            head.append("chorus")
            unit.append("%limit")
        fmt = "%10s " + " ".join(["%11s"] * (len(head) - 1))
        print(fmt % tuple(head))
        print(fmt % tuple(unit))
        ratios, big_ratios = [], []
        for s in sizes:
            c = med["chorus"][s]
            o = [med[k][s] for k in configs if k != "chorus"]
            best_bw = max([x["busbw"] for x in o if x["busbw"] is not None], default=None)
            best_t = min([x["time"] for x in o if x["time"] is not None], default=None)
            ratio = c["busbw"] / best_bw if c["busbw"] and best_bw else None
            if ratio:
                ratios.append(ratio)
                if s >= 1 << 20:
                    big_ratios.append(ratio)

            def f(v, spec="%.3f"):
                return "-" if v is None else spec % v
            cells = [fmt_bytes(s), f(c["busbw"])] + [f(x["busbw"]) for x in o] + \
                [f(ratio, "%.2f"), fmt_us(c["time"]), fmt_us(best_t)]
            if show_limit:
                cells.append(f(c["pct_limit"], "%.2f"))
            print(fmt % tuple(cells))
        smallest = sizes[0] if sizes else None
        if smallest is not None:
            lat = ", ".join("%s %s us" % (k, fmt_us(med[k][smallest]["time"])) for k in configs)
            print("## %s-byte latency (median time per op): %s" % (fmt_bytes(smallest), lat))
        if ratios:
            geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            line = "## geometric mean of ratio: %.2f over all sizes" % geo
            if big_ratios:
                line += ", %.2f over sizes >= 1M" % math.exp(
                    sum(math.log(x) for x in big_ratios) / len(big_ratios))
            print(line)
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
