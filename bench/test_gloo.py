#!/usr/bin/env python3
"""bench-gloo: the Gloo side of compare.py (gloo_allreduce_bench.py, and
compare.py --gloo where Open MPI's bench is built).

  - the check's closed form (reduced) equals the sum of every rank's input
    (pattern), computed independently, and every such sum is exact in the
    dtype at the period the bench picks; the bench's count of wrong
    elements finds none in that sum and one in a corrupted copy;
  - gloo_allreduce_bench.py under chorusrun at 2 and 3 ranks (float32, and
    int32 at 3): one JSON row per size with zero wrong elements, the rank
    count, positive times, busbw = algbw * 2(n-1)/n, and a summary;
  - compare.py --gloo --load spin:1 at 2 ranks: exit 0, a table with Gloo's
    columns, the load line naming gloo, and the JSON report holding Gloo's
    rows (all checked, none wrong).

Never asserts a time. Exits 77 (skipped) when torch with gloo is missing.

  test_gloo.py CHORUSRUN CHORUS_BENCH CHORUS_LOAD [MPI_ALLREDUCE_BENCH]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from bench_checks import expect, failures  # next to this script

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "gloo_allreduce_bench.py")


def test_check_arithmetic(torch, gloo_bench):
    for name, (tname, _, limit) in gloo_bench.DTYPES.items():
        for ranks in (2, 3, 8):
            period = gloo_bench.check_period(limit, ranks)
            index = torch.tensor([0, 1, period - 1, period, 5 * period + 3, (1 << 30) + 7])
            total = sum(gloo_bench.pattern(index, r, period) for r in range(ranks))
            expect(torch.equal(total, gloo_bench.reduced(index, ranks, period)),
                   "%s np%d: closed form = sum of inputs" % (name, ranks))
            largest = ranks * (period - 1) + ranks * (ranks - 1)
            expect(largest <= limit, "%s np%d: largest sum %d exact (limit %d)" %
                   (name, ranks, largest, limit))
            # The bench's own count: none wrong in the sum of the inputs, one
            # after one element of it is corrupted.
            exact = total.to(getattr(torch, tname))
            expect(gloo_bench.wrong_elements(exact, index, ranks, period) == 0,
                   "%s np%d: the exact sum has no wrong element" % (name, ranks))
            exact[2] += 1
            expect(gloo_bench.wrong_elements(exact, index, ranks, period) == 1,
                   "%s np%d: a corrupted element counts" % (name, ranks))


def run_bench(chorusrun, n, dtype):
    with tempfile.TemporaryDirectory(prefix="test-gloo-") as tmp:
        cmd = [chorusrun, "-np", str(n), "--timeout", "120", "--bind-to", "none",
               sys.executable, BENCH, "--store-file", os.path.join(tmp, "store"), "-b", "8",
               "-e", "64K", "-f", "8", "-n", "2", "-w", "1", "-c", "1", "-d", dtype, "--json"]
        print("+ " + " ".join(cmd), flush=True)
        env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=200, env=env)
    sys.stdout.write(proc.stdout)
    what = "gloo np%d %s" % (n, dtype)
    expect(proc.returncode == 0, "%s: exit 0 (got %d: %s)" % (what, proc.returncode,
                                                             proc.stderr[-800:]))
    objs = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    rows = [o for o in objs if not o.get("summary")]
    summary = [o for o in objs if o.get("summary")]
    expect([r.get("size") for r in rows] == [8, 64, 512, 4096, 32768],
           "%s: a row per size (got %s)" % (what, [r.get("size") for r in rows]))
    expect(len(summary) == 1 and summary[0].get("wrong") == 0, "%s: a summary, none wrong" % what)
    for r in rows:
        expect(r.get("wrong") == 0 and r.get("nranks") == n and r.get("algo") == "gloo" and
               r.get("type") == dtype, "%s: checked row %s" % (what, r))
        expect(r.get("time_us", 0) > 0 and r.get("algbw_gbps", 0) > 0,
               "%s: positive time %s" % (what, r))
        if r.get("algbw_gbps"):
            want = r["algbw_gbps"] * 2 * (n - 1) / n
            expect(abs(r["busbw_gbps"] - want) <= 1e-9 * max(1.0, want),
                   "%s: busbw = algbw * 2(n-1)/n (%s)" % (what, r))


def run_compare(chorusrun, chorus_bench, chorus_load, mpi_bench):
    with tempfile.TemporaryDirectory(prefix="test-gloo-") as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [sys.executable, os.path.join(HERE, "compare.py"), "--chorusrun", chorusrun,
               "--chorus-bench", chorus_bench, "--mpi-bench", mpi_bench, "--chorus-load",
               chorus_load, "--np", "2", "--min", "8", "--max", "4K", "--factor", "8",
               "--runs", "1", "--iters", "2", "--warmup", "1", "--skip-tuned", "--no-limit",
               "--transport-class", "tcp", "--timeout", "120", "--load", "spin:1", "--gloo",
               "--json-out", report]
        print("+ " + " ".join(cmd), flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        sys.stdout.write(proc.stdout)
        expect(proc.returncode == 0, "compare.py --gloo: exit 0 (got %d: %s)" %
               (proc.returncode, proc.stderr[-800:]))
        out = proc.stdout
        expect("vs gloo" in out and "Gloo: torch" in out, "compare.py --gloo: Gloo's columns")
        load_lines = [x for x in out.splitlines() if x.startswith("## load beside")]
        expect(load_lines and "gloo " in load_lines[0], "compare.py --gloo: the load line "
               "names gloo (%s)" % load_lines)
        if not os.path.exists(report):
            expect(False, "compare.py --gloo: wrote its report")
            return
        with open(report) as fh:
            data = json.load(fh)
    gloo = data.get("results", {}).get("2", {}).get("runs", {}).get("gloo", {})
    expect(sorted(int(s) for s in gloo) == [8, 64, 512, 4096],
           "compare.py --gloo: Gloo rows per size (got %s)" % sorted(gloo))
    expect(all(r.get("wrong") == 0 for rows in gloo.values() for r in rows),
           "compare.py --gloo: every Gloo row checked, none wrong")


def main():
    chorusrun, chorus_bench, chorus_load = (os.path.abspath(p) for p in sys.argv[1:4])
    mpi_bench = os.path.abspath(sys.argv[4]) if len(sys.argv) > 4 else None
    try:
        import torch
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_gloo_available():
            raise ImportError("torch.distributed without gloo")
    except ImportError as e:
        print("SKIPPED: no torch with gloo (%s); scripts/install-deps.sh installs it" % e)
        return 77
    sys.path.insert(0, HERE)
    import gloo_allreduce_bench
    test_check_arithmetic(torch, gloo_allreduce_bench)
    run_bench(chorusrun, 2, "float32")
    run_bench(chorusrun, 3, "int32")
    if mpi_bench and shutil.which("mpirun"):
        run_compare(chorusrun, chorus_bench, chorus_load, mpi_bench)
    else:
        print("compare.py --gloo: skipped (no mpirun or Open MPI bench)")
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
