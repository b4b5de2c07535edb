#!/usr/bin/env python3
"""bench-period: --period-us in chorus-bench, mpi_allreduce_bench and compare.py.

With --period-us P each timed op starts at the next multiple of P of the
wall clock after the previous one ended (bench/bench_period.h), and a row's
time is the ops' own. Checked for each bench (Open MPI's where mpirun and
its bench exist):
  - the run lasts at least (iters - 1) * P per size: one op per period;
  - each row's time leaves the sleeps out: below (iters - 1) / iters * P,
    what the sleeps counted in would at least give (P is 100 ms against ops
    of 8 B and 4 KiB, so only counting the sleeps can reach it);
  - each JSON row says its period, and a run without --period-us says 0;
  - every element is right (-c 1).
compare.py --period-us hands the period to both benches (its JSON report's rows
say it) and refuses it with --fusion.

  test_period.py CHORUSRUN CHORUS_BENCH COMPARE_PY [MPI_ALLREDUCE_BENCH]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from bench_checks import expect, failures  # next to this script

PERIOD_US = 100000
ITERS = 4
SIZES = ("8", "4K")  # -b 8 -e 4K -f 512: two rows


def rows_of(out):
    return [r for r in (json.loads(line) for line in out.splitlines() if line.startswith("{"))
            if not r.get("summary")]


def sweep_args(period):
    args = ["-b", SIZES[0], "-e", SIZES[1], "-f", "512", "-n", str(ITERS), "-w", "1", "-c", "1",
            "-J"]
    return args + (["--period-us", str(period)] if period else [])


def check_paced(name, cmd):
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - started
    expect(proc.returncode == 0, "%s: exit 0 (got %d: %s)" % (name, proc.returncode,
                                                            proc.stderr[-400:]))
    rows = rows_of(proc.stdout)
    expect(len(rows) == len(SIZES), "%s: a row per size (got %d)" % (name, len(rows)))
    least = len(SIZES) * (ITERS - 1) * PERIOD_US * 1e-6
    expect(elapsed >= least, "%s: one op per period takes at least %.2f s (took %.2f)" %
           (name, least, elapsed))
    for row in rows:
        expect(row.get("period_us") == PERIOD_US, "%s: the row says its period (got %s)" %
               (name, row.get("period_us")))
        expect(row.get("iters") == ITERS, "%s: %d timed ops (got %s)" % (name, ITERS,
                                                                       row.get("iters")))
        expect(0 < row["time_us"] < (ITERS - 1) / ITERS * PERIOD_US,
               "%s at %d B: the time leaves the sleeps out (got %.1f us)" %
               (name, row["size"], row["time_us"]))
        expect(row.get("wrong") == 0, "%s at %d B: every element right (got %s)" %
               (name, row["size"], row.get("wrong")))


def check_back_to_back(name, cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    rows = rows_of(proc.stdout)
    expect(proc.returncode == 0 and rows and all(r.get("period_us") == 0 for r in rows),
           "%s without --period-us: rows say period 0 (got %s)" % (name, proc.stdout[-300:]))


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    chorusrun, bench, compare = (os.path.abspath(p) for p in sys.argv[1:4])
    mpi_bench = os.path.abspath(sys.argv[4]) if len(sys.argv) > 4 else None
    chorus = [chorusrun, "-np", "2", "--timeout", "100", bench, "allreduce", "--no-limit"]
    check_paced("chorus-bench", chorus + sweep_args(PERIOD_US))
    check_back_to_back("chorus-bench", chorus + sweep_args(0))

    ompi = None
    mpirun = shutil.which("mpirun")
    if mpi_bench and mpirun:
        ompi = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", "--mca", "pml",
                "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo", mpi_bench]
        check_paced("mpi_allreduce_bench", ompi + sweep_args(PERIOD_US))
        check_back_to_back("mpi_allreduce_bench", ompi + sweep_args(0))
        with tempfile.TemporaryDirectory(prefix="test-period-") as tmp:
            report = os.path.join(tmp, "report.json")
            build = os.path.dirname(os.path.dirname(bench))
            cmd = [sys.executable, compare, "--build-dir", build, "--chorusrun", chorusrun,
                   "--chorus-bench", bench, "--mpi-bench", mpi_bench, "--np", "2", "--min", "8",
                   "--max", "8", "--runs", "1", "--iters", "2", "--warmup", "1",
                   "--transport-class", "tcp", "--skip-tuned", "--no-limit", "--period-us", "20000",
                   "--json-out", report]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            expect(proc.returncode == 0, "compare.py --period-us: exit 0 (got %d: %s)" %
                   (proc.returncode, proc.stderr[-400:]))
            if proc.returncode == 0:
                with open(report) as fh:
                    runs = json.load(fh)["results"]["2"]["runs"]
                periods = {config: [row.get("period_us") for rows in by_size.values() for row in rows]
                         for config, by_size in runs.items()}
                expect(set(periods) >= {"chorus", "ompi"} and
                       all(p and all(v == 20000 for v in p) for p in periods.values()),
                       "compare.py --period-us: every run of every bench paced (got %s)" % periods)
        proc = subprocess.run([sys.executable, compare, "--fusion", "--chorusrun", chorusrun,
                               "--chorus-bench", bench, "--mpi-bench", mpi_bench, "--period-us",
                               "1000"],
                              capture_output=True, text=True, timeout=60)
        expect(proc.returncode == 2 and "--period-us" in proc.stderr,
               "compare.py --fusion --period-us: refused (got %d: %s)" %
               (proc.returncode, proc.stderr[-300:]))
    else:
        print("mpi_allreduce_bench and compare.py --period-us: skipped (no mpirun or Open MPI "
              "bench)")

    if failures:
        print("%d check(s) failed" % len(failures), file=sys.stderr)
        return 1
    print("bench-period: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
