#!/usr/bin/env python3
"""bench-load: chorus-load and compare.py --load.

  - chorus-load, both kinds: stops at --seconds and at SIGTERM, reports its
    work per second as JSON; refuses an unknown kind;
  - load_beside.LoadBeside: measures the load alone, runs it around a call
    (whose result, or exception, passes through), records one fraction of
    the load alone per call and the CPU seconds of the call's own child
    processes (not the load's), and leaves no load running;
  - compare.py --fusion --load (with a stand-in Chorus side, as
    test_compare_fusion.py, and the real Open MPI bench when mpirun is
    there): the "load beside" line names every configuration, and the JSON
    report holds a fraction per run; every run is in compare.py's session
    (so the kernel's autogroup scheduling puts it beside the load).
Never asserts a wall time or a rate beyond its being positive (the one CPU
time it asserts is a child's that computes until its own clock says 0.4 s).

  test_load.py CHORUS_LOAD COMPARE_PY [MPI_ALLREDUCE_BENCH]
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from bench_checks import expect, failures  # next to this script


def running(binary):
    """Pids of live processes whose command line starts with binary."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as fh:
                argv0 = fh.read().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if argv0 == binary:
            pids.append(int(pid))
    return pids


def check_report(row, kind, workers, what):
    expect(row.get("kind") == kind and row.get("workers") == workers and
           row.get("unit") == ("Giter" if kind == "spin" else "Gflop") and
           row.get("work_per_s", 0) > 0 and row.get("seconds", 0) > 0,
           "%s: a report of %s x%d with positive work (got %s)" % (what, kind, workers, row))


def test_chorus_load(binary, load_beside):
    for kind in ("spin", "matmul"):
        proc = subprocess.run([binary, "-k", kind, "-w", "2", "-s", "0.3", "-J", "--size", "32"],
                              capture_output=True, text=True, timeout=60)
        expect(proc.returncode == 0, "%s -s 0.3: exit 0 (got %d)" % (kind, proc.returncode))
        check_report(load_beside.parse_report(proc.stdout), kind, 2, kind + " -s 0.3")
    proc = subprocess.Popen([binary, "-k", "spin", "-w", "1", "-J"], stdout=subprocess.PIPE,
                            text=True)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    expect(proc.returncode == 0, "SIGTERM: a clean exit (got %d)" % proc.returncode)
    check_report(load_beside.parse_report(out), "spin", 1, "spin until SIGTERM")
    proc = subprocess.run([binary, "-k", "dance"], capture_output=True, text=True, timeout=60)
    expect(proc.returncode != 0, "an unknown kind is refused")


def test_load_beside(binary, load_beside):
    for bad in ("dance", "spin:0", "spin:x"):
        try:
            load_beside.parse_spec(bad)
            expect(False, "parse_spec refuses %r" % bad)
        except ValueError:
            pass
    expect(load_beside.parse_spec("matmul:3") == ("matmul", 3), "parse_spec('matmul:3')")
    expect(load_beside.parse_spec("spin")[1] == (os.cpu_count() or 1), "workers default: CPUs")

    load = load_beside.LoadBeside(binary, "spin:1", alone_seconds=0.3)
    expect(load.alone["work_per_s"] > 0, "the load alone did work")
    expect(load.run("k", lambda x: x * 2, 21) == 42, "run() returns the call's result")
    try:
        load.run("k", lambda: 1 / 0)
        expect(False, "run() lets the call's exception through")
    except ZeroDivisionError:
        pass
    values = load.fractions("k")
    expect(len(values) == 2 and all(isinstance(v, float) and v > 0 for v in values),
           "one positive fraction per call, also for the call that raised (got %s)" % values)
    expect(load.fraction("k") is not None and load.fraction("none") is None,
           "the median fraction of a key with runs, None without")
    lost = load.losts("k")
    expect(len(lost) == 2 and all(isinstance(v, float) for v in lost),
           "seconds lost recorded per call (got %s)" % lost)
    started = time.monotonic()
    load.run("sleep", time.sleep, 0.3)
    wall = time.monotonic() - started
    expect(load.lost("sleep") is not None and load.lost("sleep") < wall,
           "the load cannot lose more than the run lasted (lost %s of %.2f s)"
           % (load.lost("sleep"), wall))
    # CPU seconds: of the processes the call ran, not of the load beside it.
    busy = [sys.executable, "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass"]
    load.run("busy", subprocess.run, busy, check=True, timeout=60)
    load.run("idle", subprocess.run, ["sleep", "0.4"], check=True, timeout=60)
    busy_cpu, idle_cpu = load.cpu("busy"), load.cpu("idle")
    expect(busy_cpu is not None and busy_cpu >= 0.4,
           "a child that computed 0.4 s counts at least 0.4 CPU seconds (got %s)" % busy_cpu)
    expect(idle_cpu is not None and idle_cpu < 0.2,
           "a sleeping child counts almost none, the load beside it not at all (got %s)"
           % idle_cpu)
    expect(len(load.cpus("k")) == 2 and load.cpu("none") is None,
           "CPU seconds per call, also for a call that raised; None without a run")
    expect(not running(binary), "no chorus-load left running (%s)" % running(binary))


def test_compare(binary, compare, mpi_bench):
    if not mpi_bench or shutil.which("mpirun") is None:
        print("compare.py --load: skipped (no mpirun or Open MPI bench)")
        return
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import test_compare_fusion as fakes  # the stand-in Chorus side

    with tempfile.TemporaryDirectory(prefix="chorus-load-") as tmp:
        chorusrun = os.path.join(tmp, "chorusrun")
        bench = os.path.join(tmp, "chorus-bench")
        # The launcher stand-in notes its session first: with autogroup
        # scheduling, a run in a session of its own would not meet the load.
        fakes.write_exe(chorusrun, fakes.FAKE_CHORUSRUN.replace(
            "import os, sys\n",
            "import os, sys\nopen(os.environ['FAKE_SIDS'], 'a').write('%d\\n' % os.getsid(0))\n"))
        fakes.write_exe(bench, fakes.FAKE_CHORUS_BENCH)
        out_json = os.path.join(tmp, "load.json")
        cmd = [sys.executable, compare, "--fusion", "--chorusrun", chorusrun, "--chorus-bench",
               bench, "--mpi-bench", mpi_bench, "--np", "2", "--tensors", "8", "--bytes-each",
               "1K", "--iters", "2", "--warmup", "0", "--skip-tuned", "--timeout", "120",
               "--runs", "2", "--load", "spin:1", "--chorus-load", binary, "--json-out",
               out_json]
        sids = os.path.join(tmp, "sids")
        env = dict(os.environ, FAKE_COUNTER=os.path.join(tmp, "counter"), FAKE_SIDS=sids)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        print(proc.stdout)
        expect(proc.returncode == 0, "compare.py --load: exit 0 (got %d: %s)" %
               (proc.returncode, proc.stderr[-1500:]))
        line = next((x for x in proc.stdout.splitlines() if x.startswith("## load beside")), "")
        expect("spin x1" in line and "chorus " in line and "ompi " in line,
               "the load line names the load and every configuration (got %r)" % line)
        try:
            with open(out_json) as fh:
                report = json.load(fh)["load"]
            fractions, lost, cpu = report["fractions"], report["lost_s"], report["cpu_s"]
        except (OSError, ValueError, KeyError) as e:
            fractions, lost, cpu = {}, {}, {}
            expect(False, "--json-out has the load's fractions, seconds lost and the runs' CPU "
                   "seconds (%s)" % e)
        lost_line = next((x for x in proc.stdout.splitlines() if x.startswith("## seconds of")),
                         "")
        expect("chorus " in lost_line and "ompi " in lost_line,
               "the seconds-lost line names every configuration (got %r)" % lost_line)
        cpu_line = next((x for x in proc.stdout.splitlines() if x.startswith("## CPU seconds")),
                        "")
        expect("chorus " in cpu_line and "ompi " in cpu_line,
               "the CPU-seconds line names every configuration (got %r)" % cpu_line)
        try:
            seen = [int(x) for x in open(sids).read().split()]
        except OSError:
            seen = []
        expect(seen and set(seen) == {os.getsid(0)},
               "every run shares the session of compare.py and its load (sessions %s, ours %d)"
               % (sorted(set(seen)), os.getsid(0)))
        for config in ("chorus", "ompi"):
            got = fractions.get("2/" + config, [])
            expect(len(got) == 2 and all(v and v > 0 for v in got),
                   "two positive fractions for %s (got %s)" % (config, got))
            got = lost.get("2/" + config, [])
            expect(len(got) == 2 and all(isinstance(v, float) for v in got),
                   "two seconds-lost figures for %s (got %s)" % (config, got))
            got = cpu.get("2/" + config, [])
            expect(len(got) == 2 and all(isinstance(v, float) and v > 0 for v in got),
                   "two positive CPU-seconds figures for %s (got %s)" % (config, got))


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    binary, compare = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    mpi_bench = sys.argv[3] if len(sys.argv) == 4 else ""
    sys.path.insert(0, os.path.dirname(compare))
    import load_beside

    test_chorus_load(binary, load_beside)
    test_load_beside(binary, load_beside)
    test_compare(binary, compare, mpi_bench)
    print("test_load: %s" % ("OK" if not failures else "%d failure(s)" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
