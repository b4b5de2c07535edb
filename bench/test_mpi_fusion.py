#!/usr/bin/env python3
"""bench-mpi-fusion: the Open MPI side of the tensor-fusion benchmark, run
briefly under mpirun with every element checked (-c 1):

  mpi_allreduce_bench fusion -N 16 -b 4K        (2 ranks, uniform tensors)
  mpi_allreduce_bench fusion --mix resnet50     (2 ranks, ResNet-50's 161 tensors)

Asserts the exit status, one JSON row per mode with the contract's fields
(docs/benchmarks.md, "Tensor fusion"), zero wrong elements, the shape of the
step (tensors, bytes) and a positive step time, and that a bad mix name fails
with exit status 2 naming the known mixes. Never asserts timings.

  test_mpi_fusion.py BUILD/bench/mpi_allreduce_bench

Exit 77 (meson's skip) when mpirun is not on PATH.
"""
import json
import shutil
import subprocess
import sys

MPIRUN_ARGS = ["--allow-run-as-root", "--oversubscribe", "--mca", "btl", "tcp,self",
               "--mca", "btl_tcp_if_include", "lo", "--mca", "pml", "ob1"]
FIELDS = ("impl", "mode", "tensors", "bytes", "bytes_each", "mix", "np", "step_us", "wrong")

failures = []


def expect(ok, what):
    if not ok:
        failures.append(what)
        print("FAILED: " + what, file=sys.stderr)


def run(bench, np_, args, timeout=240):
    cmd = ["mpirun"] + MPIRUN_ARGS + ["-np", str(np_), bench, "fusion"] + args
    print("+ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    sys.stdout.write(proc.stdout)
    rows, summary = [], None
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            obj = json.loads(line)
            if obj.get("summary"):
                summary = obj
            else:
                rows.append(obj)
    return proc, rows, summary


def check_run(bench, np_, args, tensors, step_bytes, bytes_each, mix):
    proc, rows, summary = run(bench, np_, args + ["-c", "1", "--json"])
    what = " ".join(args)
    expect(proc.returncode == 0, "%s: exit status %d\n%s" % (what, proc.returncode,
                                                             proc.stderr[-2000:]))
    expect([r.get("mode") for r in rows] == ["per_tensor", "single_buffer"],
           "%s: one row per mode, per_tensor then single_buffer (got %s)" %
           (what, [r.get("mode") for r in rows]))
    for r in rows:
        for field in FIELDS:
            expect(field in r, "%s: row %s has field %s" % (what, r.get("mode"), field))
        expect(r.get("impl") == "ompi", "%s: impl is ompi" % what)
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
        expect(isinstance(r.get("step_us"), (int, float)) and r["step_us"] > 0,
               "%s: a positive step_us" % what)
    expect(summary is not None and summary.get("wrong") == 0,
           "%s: a summary line with wrong 0 (got %s)" % (what, summary))


def main():
    if len(sys.argv) != 2:
        print("usage: test_mpi_fusion.py MPI_ALLREDUCE_BENCH", file=sys.stderr)
        return 2
    bench = sys.argv[1]
    if shutil.which("mpirun") is None:
        print("mpirun is not on PATH: skipped")
        return 77
    check_run(bench, 2, ["-N", "16", "-b", "4K", "-n", "3", "-w", "1"], 16, 16 * 4096, 4096, None)
    # -b rounds down to whole float32 elements: 10 bytes -> 2 elements.
    check_run(bench, 3, ["-N", "5", "-b", "10", "-n", "2", "-w", "0"], 5, 5 * 8, 8, None)
    check_run(bench, 2, ["--mix", "resnet50", "-n", "1", "-w", "0"], 161, 25557032 * 4, None,
              "resnet50")
    proc, rows, _ = run(bench, 2, ["--mix", "no-such-mix", "--json"])
    expect(proc.returncode != 0 and not rows, "an unknown mix fails without rows")
    expect("resnet50" in proc.stderr, "an unknown mix's error lists the known mixes")
    print("test_mpi_fusion: %s" % ("OK" if not failures else "%d failure(s)" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
