"""CPU load beside benchmark runs, for compare.py --load (and any runner).

A LoadBeside measures its load (chorus-load, bench/chorus_load.cpp) alone
once, then runs it around each benchmark invocation it is handed, so that
Chorus and Open MPI (and anything else) meet the identical load in the same
invocation. For each invocation it records the work per second the load got
done beside it as a fraction of the load alone: what the benchmark cost the
computation it stands in for. The load starts before the benchmark's
launcher and stops after it, so the fraction covers the launch too: compare
configurations with each other, not with a figure of their own.

  load = LoadBeside("build/bench/chorus-load", "matmul:2")
  rows = load.run(("np2", "chorus"), run_one, cmd, timeout)
  load.fraction(("np2", "chorus"))   # median over the runs so far
  load.lost(("np2", "chorus"))       # seconds of the load's work lost, median
  load.cpu(("np2", "chorus"))        # CPU seconds the benchmark's processes used, median

Standard library only.
"""
import json
import os
import resource
import signal
import statistics
import subprocess
import time

KINDS = ("spin", "matmul")
STARTUP_S = 0.2  # the load's threads are running by then


def parse_spec(spec):
    """'KIND' or 'KIND:WORKERS' -> (kind, workers); workers default to the CPUs."""
    kind, _, workers = spec.partition(":")
    if kind not in KINDS:
        raise ValueError("--load %r: the kind is one of %s" % (spec, ", ".join(KINDS)))
    try:
        count = int(workers) if workers else (os.cpu_count() or 1)
    except ValueError:
        raise ValueError("--load %r: WORKERS is a whole number" % spec) from None
    if count < 1:
        raise ValueError("--load %r: at least one worker" % spec)
    return kind, count


def parse_report(out):
    """chorus-load -J's JSON object (its last line of output)."""
    for line in reversed(out.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            row = json.loads(line)
            if isinstance(row.get("work_per_s"), (int, float)):
                return row
    raise RuntimeError("chorus-load printed no report: %r" % out[-200:])


class LoadBeside:
    def __init__(self, binary, spec, alone_seconds=3.0):
        self.kind, self.workers = parse_spec(spec)
        self.binary = binary
        # key -> per run the load's (work, seconds, work per second), or None
        self._reports = {}
        # key -> per run the CPU seconds of the processes that ended during it
        self._cpu = {}
        proc = subprocess.run(self._command() + ["-s", str(alone_seconds)], capture_output=True,
                              text=True, timeout=alone_seconds + 60, check=False)
        if proc.returncode != 0:
            raise RuntimeError("chorus-load alone failed (%d): %s" %
                               (proc.returncode, proc.stderr.strip()[-300:]))
        self.alone = parse_report(proc.stdout)

    def _command(self):
        return [self.binary, "-k", self.kind, "-w", str(self.workers), "-J"]

    def describe(self):
        return "%s x%d (alone: %.3f %s/s)" % (self.kind, self.workers, self.alone["work_per_s"],
                                              self.alone["unit"])

    def run(self, key, fn, *args, **kwargs):
        """fn(*args, **kwargs) with the load running beside it; records the
        load's fraction of its work alone under key and returns fn's result."""
        proc = subprocess.Popen(self._command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            time.sleep(STARTUP_S)
            before = _children_cpu()
            try:
                return fn(*args, **kwargs)
            finally:
                # The load is still running here, so what ended since is the
                # benchmark's processes (a launcher counts its ranks once it
                # has reaped them).
                self._cpu.setdefault(key, []).append(_children_cpu() - before)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                out, _ = proc.communicate(timeout=30)
                row = parse_report(out)
                self._reports.setdefault(key, []).append(
                    (row["work"], row["seconds"], row["work_per_s"]))
            except (subprocess.TimeoutExpired, RuntimeError, ValueError, KeyError):
                proc.kill()
                proc.communicate()
                self._reports.setdefault(key, []).append(None)

    def fractions(self, key):
        """Per run of key: the load's work per second beside it as a fraction
        of alone (None where the load gave no report)."""
        rate = self.alone["work_per_s"]
        return [r and r[2] / rate for r in self._reports.get(key, [])]

    def losts(self, key):
        """Per run of key: the seconds of work the load lost beside it, its
        time beside it less the time its work would have taken alone. Unlike
        the fraction, this does not favour a slower benchmark that spreads the
        same work over more time."""
        rate = self.alone["work_per_s"]
        return [r and r[1] - r[0] / rate for r in self._reports.get(key, [])]

    def fraction(self, key):
        """The median of fractions(key), None without a run."""
        return _median(self.fractions(key))

    def lost(self, key):
        """The median of losts(key), None without a run."""
        return _median(self.losts(key))

    def cpus(self, key):
        """Per run of key: the CPU seconds (user and system) of every process
        that fn started and waited for, launcher and ranks. Unlike the load's
        fraction, this does not favour a slower benchmark that spreads the
        same work over more time: it is what the collectives took from the
        cores, whenever they took it."""
        return list(self._cpu.get(key, []))

    def cpu(self, key):
        """The median of cpus(key), None without a run."""
        return _median(self.cpus(key))


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
