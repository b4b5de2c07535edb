#!/usr/bin/env python3
"""bench-fusion-SIDE: either side of the tensor-fusion benchmark
(mpi_allreduce_bench fusion under mpirun, chorus-bench fusion under
chorusrun), run briefly with every element checked (-c 1):

  fusion -N 16 -b 4K        (2 ranks, uniform tensors)
  fusion -N 5 -b 10         (3 ranks; -b rounds down to whole float32s)
  fusion --mix resnet50     (2 ranks, ResNet-50's 161 tensors)

Asserts the exit status, one JSON row per mode in the side's order with the
contract's fields (docs/benchmarks.md, "Tensor fusion"), zero wrong elements,
the shape of the step (tensors, bytes), positive step times with min_us at
most step_us and mean_us, and that a bad mix name fails without rows, naming
the known mixes. Never asserts timings.

  test_fusion_bench.py ompi BUILD/bench/mpi_allreduce_bench
  test_fusion_bench.py chorus BUILD/tools/chorusrun BUILD/bench/chorus-bench TRANSPORT

Exit 77 (meson's skip) for the Open MPI side when mpirun is not on PATH.
"""
import shutil
import subprocess
import sys

from compare_util import json_rows
from bench_checks import expect, failures  # next to this script

MPIRUN_ARGS = ["--allow-run-as-root", "--oversubscribe", "--mca", "btl", "tcp,self",
               "--mca", "btl_tcp_if_include", "lo", "--mca", "pml", "ob1"]
FIELDS = ("impl", "mode", "tensors", "bytes", "bytes_each", "mix", "np", "step_us", "mean_us",
          "min_us", "wrong")
MODES = {"ompi": ["per_tensor", "single_buffer"],
         "chorus": ["fused", "per_tensor", "single_buffer"]}


def launch(side, np_):
    """The command that starts the side's bench on np_ ranks, up to "fusion"."""
    if side["impl"] == "ompi":
        return ["mpirun"] + MPIRUN_ARGS + ["-np", str(np_), side["bench"], "fusion"]
    return [side["chorusrun"], "-np", str(np_), "--timeout", "60", side["bench"], "fusion",
            "-t", side["transport"]]


def run(side, np_, args, timeout=70):
    cmd = launch(side, np_) + args
    print("+ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    sys.stdout.write(proc.stdout)
    rows, summary = json_rows(proc.stdout)
    return proc, rows, summary


def check_run(side, np_, args, tensors, step_bytes, bytes_each, mix):
    proc, rows, summary = run(side, np_, args + ["-c", "1", "--json"])
    what = " ".join(args)
    expect(proc.returncode == 0, "%s: exit status %d\n%s" % (what, proc.returncode,
                                                             proc.stderr[-2000:]))
    modes = MODES[side["impl"]]
    expect([r.get("mode") for r in rows] == modes,
           "%s: one row per mode, %s (got %s)" % (what, modes, [r.get("mode") for r in rows]))
    for r in rows:
        for field in FIELDS:
            expect(field in r, "%s: row %s has field %s" % (what, r.get("mode"), field))
        expect(r.get("impl") == side["impl"], "%s: impl is %s" % (what, side["impl"]))
        expect(r.get("np") == np_, "%s: np is %d" % (what, np_))
        expect(r.get("tensors") == tensors, "%s: %d tensors (got %s)" %
               (what, tensors, r.get("tensors")))
        expect(r.get("bytes") == step_bytes, "%s: %d bytes per step (got %s)" %
               (what, step_bytes, r.get("bytes")))
        expect(r.get("bytes_each") == bytes_each, "%s: bytes_each %s (got %s)" %
               (what, bytes_each, r.get("bytes_each")))
        expect(r.get("mix") == mix, "%s: mix %s (got %s)" % (what, mix, r.get("mix")))
        expect(r.get("wrong") == 0, "%s: %s: no wrong element (got %s)" %
               (what, r.get("mode"), r.get("wrong")))
        times = [r.get(f) for f in ("step_us", "mean_us", "min_us")]
        numbers = all(isinstance(t, (int, float)) and t > 0 for t in times)
        expect(numbers, "%s: %s: positive step_us, mean_us, min_us (got %s)" %
               (what, r.get("mode"), times))
        if numbers:
            expect(times[2] <= times[0] and times[2] <= times[1],
                   "%s: %s: min_us %s above step_us %s or mean_us %s" %
                   (what, r.get("mode"), times[2], times[0], times[1]))
    expect(summary is not None and summary.get("wrong") == 0,
           "%s: a summary line with wrong 0 (got %s)" % (what, summary))


def main():
    a = sys.argv[1:]
    if a[:1] == ["ompi"] and len(a) == 2:
        side = {"impl": "ompi", "bench": a[1]}
        if shutil.which("mpirun") is None:
            print("mpirun is not on PATH: skipped")
            return 77
    elif a[:1] == ["chorus"] and len(a) == 4:
        side = {"impl": "chorus", "chorusrun": a[1], "bench": a[2], "transport": a[3]}
    else:
        print("usage: test_fusion_bench.py ompi MPI_ALLREDUCE_BENCH\n"
              "       test_fusion_bench.py chorus CHORUSRUN CHORUS_BENCH TRANSPORT",
              file=sys.stderr)
        return 2
    check_run(side, 2, ["-N", "16", "-b", "4K", "-n", "3", "-w", "1"], 16, 16 * 4096, 4096, None)
    check_run(side, 3, ["-N", "5", "-b", "10", "-n", "2", "-w", "0"], 5, 5 * 8, 8, None)
    check_run(side, 2, ["--mix", "resnet50", "-n", "1", "-w", "0"], 161, 25557032 * 4, None,
              "resnet50")
    proc, rows, _ = run(side, 2, ["--mix", "no-such-mix", "--json"])
    expect(proc.returncode != 0 and not rows, "an unknown mix fails without rows")
    expect("resnet50" in proc.stderr and "bert-base" in proc.stderr,
           "an unknown mix's error lists the known mixes")
    print("test_fusion_bench %s: %s" %
          (side["impl"], "OK" if not failures else "%d failure(s)" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
