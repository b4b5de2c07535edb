#!/usr/bin/env python3
"""bench-compare-fusion: compare.py --fusion against the real Open MPI side
(mpi_allreduce_bench fusion under mpirun) and a stand-in Chorus side that
follows the JSON contract of docs/benchmarks.md ("Tensor fusion") with known
step times, so the table's medians and fused ratios can be asserted:

  fused 100/120/110 us, per_tensor 400, single_buffer 80 (three runs)
  -> medians 110, 400, 80; fused / per_tensor 0.28, fused / single_buffer 1.38

It also checks what compare.py passes to chorus-bench (fusion, -t tcp, the
tensors, --json), and that a chorus-bench without a fusion mode (one older
than that mode rejects the word) leaves an Open MPI-only table with a note,
exit status 0. Never asserts Open MPI's timings.

  test_compare_fusion.py COMPARE_PY MPI_ALLREDUCE_BENCH

Exit 77 (meson's skip) when mpirun is not on PATH.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

from bench_checks import expect, failures  # next to this script

FAKE_CHORUSRUN = r'''#!/usr/bin/env python3
# chorusrun stand-in: drops "-np N --timeout S", runs the program once.
import os, sys
a = sys.argv[1:]
while a and a[0].startswith("-"):
    a = a[2:]
os.execv(a[0], a)
'''

FAKE_CHORUS_BENCH = r'''#!/usr/bin/env python3
# chorus-bench stand-in following the fusion JSON contract; step times by run.
import json, os, sys
args = sys.argv[1:]
if not args or args[0] != "fusion":
    sys.exit(2)
if os.environ.get("FAKE_NO_FUSION"):
    print("chorus-bench: collective: fusion not in {allreduce,...}", file=sys.stderr)
    sys.exit(106)
counter = os.environ["FAKE_COUNTER"]
n = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(n + 1))
# The first invocation is compare.py's probe; then runs 1, 2, 3.
fused = {0: 50.0, 1: 100.0, 2: 120.0, 3: 110.0}.get(n, 999.0)
steps = {"fused": fused, "per_tensor": 400.0, "single_buffer": 80.0}
tensors = int(args[args.index("-N") + 1]) if "-N" in args else 161
each = int(args[args.index("-b") + 1]) if "-b" in args else None
for mode, us in steps.items():
    print(json.dumps({"impl": "chorus", "mode": mode, "tensors": tensors,
                      "bytes": tensors * (each or 4), "bytes_each": each, "mix": None,
                      "np": 2, "step_us": us, "mean_us": us * 1.5 + n, "wrong": 0,
                      "argv": args}))
print(json.dumps({"summary": True, "impl": "chorus", "wrong": 0}))
'''


def write_exe(path, text):
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def main():
    if len(sys.argv) != 3:
        print("usage: test_compare_fusion.py COMPARE_PY MPI_ALLREDUCE_BENCH", file=sys.stderr)
        return 2
    compare, mpi_bench = sys.argv[1:]
    if shutil.which("mpirun") is None:
        print("mpirun is not on PATH: skipped")
        return 77
    with tempfile.TemporaryDirectory(prefix="chorus-cmpfus-") as tmp:
        chorusrun = os.path.join(tmp, "chorusrun")
        bench = os.path.join(tmp, "chorus-bench")
        write_exe(chorusrun, FAKE_CHORUSRUN)
        write_exe(bench, FAKE_CHORUS_BENCH)
        out_json = os.path.join(tmp, "fusion.json")
        base = [sys.executable, compare, "--fusion", "--chorusrun", chorusrun, "--chorus-bench",
                bench, "--mpi-bench", mpi_bench, "--np", "2", "--tensors", "8", "--bytes-each",
                "1K", "--iters", "2", "--warmup", "0", "--skip-tuned", "--timeout", "120"]
        env = dict(os.environ, FAKE_COUNTER=os.path.join(tmp, "counter"))
        proc = subprocess.run(base + ["--runs", "3", "--json-out", out_json], env=env,
                              capture_output=True, text=True, timeout=600)
        print(proc.stdout)
        expect(proc.returncode == 0, "exit 0 (got %d: %s)" % (proc.returncode,
                                                              proc.stderr[-1500:]))
        expect("fused / per_tensor: 0.28 (Chorus's per_tensor)" in proc.stdout,
               "the fused / per_tensor ratio of the medians (110 / 400)")
        expect("fused / single_buffer: 1.38 (Chorus's single_buffer)" in proc.stdout,
               "the fused / single_buffer ratio of the medians (110 / 80)")
        expect("## mean step time in us" in proc.stdout, "a table of the mean step times")
        try:
            report = json.load(open(out_json))
        except (OSError, ValueError) as e:
            report = None
            expect(False, "--json-out written (%s)" % e)
        if report:
            med = report["results"]["2"]["medians"]
            expect(med.get("chorus") == {"fused": 110.0, "per_tensor": 400.0,
                                         "single_buffer": 80.0},
                   "chorus medians over the three runs (got %s)" % med.get("chorus"))
            # mean_us = 1.5 step_us + run: fused 151, 182, 168; the others + 1..3.
            mean = report["results"]["2"].get("means", {})
            expect(mean.get("chorus") == {"fused": 168.0, "per_tensor": 602.0,
                                          "single_buffer": 122.0},
                   "chorus means: medians over the three runs (got %s)" % mean.get("chorus"))
            ompi_mean = {k: v for k, v in mean.get("ompi", {}).items() if v is not None}
            expect(set(ompi_mean) == {"per_tensor", "single_buffer"} and
                   all(isinstance(v, float) and v > 0 for v in ompi_mean.values()),
                   "ompi means for per_tensor and single_buffer (got %s)" % ompi_mean)
            ompi = {k: v for k, v in med.get("ompi", {}).items() if v is not None}
            expect(set(ompi) == {"per_tensor", "single_buffer"} and
                   all(isinstance(v, float) and v > 0 for v in ompi.values()),
                   "ompi medians for per_tensor and single_buffer (got %s)" % ompi)
            rows = report["results"]["2"]["runs"]["chorus"]
            expect(len(rows) == 9 and sorted({r["run"] for r in rows}) == [1, 2, 3],
                   "nine chorus rows, stamped with their run")
            argv = rows[0].get("argv", []) if rows else []
            for want in (["fusion"], ["-t", "tcp"], ["-N", "8"], ["-b", "1024"], ["--json"],
                         ["-c", "1"]):
                expect(any(argv[i:i + len(want)] == want for i in range(len(argv))),
                       "chorus-bench is given %s (got %s)" % (" ".join(want), argv))
            ompi_rows = report["results"]["2"]["runs"]["ompi"]
            expect(all(r.get("wrong") == 0 and r.get("tensors") == 8 and r.get("bytes") == 8192
                       for r in ompi_rows) and len(ompi_rows) == 6,
                   "six checked Open MPI rows of 8 tensors, 8192 bytes")

        # A chorus-bench without the fusion mode: Open MPI alone, with a note.
        env["FAKE_NO_FUSION"] = "1"
        proc = subprocess.run(base + ["--runs", "1"], env=env, capture_output=True, text=True,
                              timeout=600)
        print(proc.stdout)
        expect(proc.returncode == 0, "without Chorus fusion: exit 0 (got %d: %s)" %
               (proc.returncode, proc.stderr[-1500:]))
        expect("no usable fusion mode" in proc.stdout and "fusion not in" in proc.stdout,
               "without Chorus fusion: a note quoting chorus-bench's refusal")
        expect("no fused ratios" in proc.stdout and "per_tensor" in proc.stdout,
               "without Chorus fusion: Open MPI's table, no fused ratios")
    print("test_compare_fusion: %s" % ("OK" if not failures else "%d failure(s)" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
