#!/usr/bin/env python3
"""Tests beside a CPU load: one busy thread per core (chorus-load, the load of
compare.py --load), in this process's session, so that the kernel's autogroup
scheduling puts the ranks beside it as it would a framework's compute threads.

  under_load.py --load CHORUS_LOAD [--kind spin] [--workers N] -- COMMAND...
      Runs COMMAND (a test: the fault suite, say) with the load running, and
      exits with its status.
  under_load.py --load CHORUS_LOAD --sweep --chorusrun PATH --bench PATH
                [--np 2,4,8] [--transports shm,tcp] [--collectives ...]
      Every collective at 8 B to 1 MiB through chorus-bench -c 1 (each
      element of an extra call checked against the value it must have), per
      rank count and transport, each job bounded by CHORUS_TIMEOUT and the
      launcher's --timeout. Fails on a wrong element, a failed or hung job.

Prints the load's work beside the test as a fraction of its work alone (for
the reader: never asserted).
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import load_beside  # noqa: E402

COLLECTIVES = ("allreduce", "allgather", "broadcast", "reduce-scatter")
JOB_TIMEOUT_S = 120  # the launcher's bound on a job; calls time out at CALL_TIMEOUT_S
CALL_TIMEOUT_S = 60


def run_job(cmd, env):
    """(ok, what) for one chorus-bench job: exit 0, a summary, no wrong element."""
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                              timeout=JOB_TIMEOUT_S + 30)
    except subprocess.TimeoutExpired:
        return False, "no end after %ds" % (JOB_TIMEOUT_S + 30)
    took = time.monotonic() - start
    summary, rows = None, 0
    for line in proc.stdout.splitlines():
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        if obj.get("summary"):
            summary = obj
        else:
            rows += 1
            if obj.get("wrong", 0) != 0:
                return False, "size %s: %s wrong elements" % (obj.get("size"), obj["wrong"])
    if proc.returncode != 0 or summary is None or rows == 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-10:])
        return False, "exit %d, %d rows, summary %s:\n%s" % (proc.returncode, rows,
                                                           summary is not None, tail)
    return True, "%d sizes checked, %.1fs" % (rows, took)


def sweep(args):
    env = dict(os.environ, CHORUS_TIMEOUT=str(CALL_TIMEOUT_S))
    failed = 0
    for transport in args.transports.split(","):
        for np in (int(n) for n in args.np.split(",")):
            for coll in args.collectives.split(","):
                cmd = [args.chorusrun, "-np", str(np), "--timeout", str(JOB_TIMEOUT_S), args.bench,
                       coll, "-t", transport, "-b", "8", "-e", "1M", "-f", "32", "-w", "1", "-n",
                       "3", "-c", "1", "--no-limit", "-J"]
                ok, what = run_job(cmd, env)
                failed += not ok
                print("%-8s np %d  %-15s %s  %s" % (transport, np, coll, "ok  " if ok else "FAIL",
                                                     what), flush=True)
    return failed


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--load", required=True, help="chorus-load")
    p.add_argument("--kind", default="spin", choices=load_beside.KINDS)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--chorusrun")
    p.add_argument("--bench")
    p.add_argument("--np", default="2,4,8")
    p.add_argument("--transports", default="shm,tcp")
    p.add_argument("--collectives", default=",".join(COLLECTIVES))
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.sweep == bool(command):
        p.error("give either --sweep or -- COMMAND")
    if args.sweep and not (args.chorusrun and args.bench):
        p.error("--sweep needs --chorusrun and --bench")

    load = load_beside.LoadBeside(args.load, "%s:%d" % (args.kind, args.workers),
                                  alone_seconds=1.0)
    print("under_load: %s beside the test" % load.describe(), flush=True)
    if args.sweep:
        failed = load.run("test", sweep, args)
        status = 1 if failed else 0
        print("under_load: sweep %s" % ("OK" if not failed else "%d job(s) failed" % failed))
    else:
        status = load.run("test", lambda: subprocess.run(command).returncode)
    fraction = load.fraction("test")
    print("under_load: the load did %s of its work alone beside the test" %
          ("%.2f" % fraction if fraction is not None else "an unknown share"))
    return status


if __name__ == "__main__":
    sys.exit(main())
