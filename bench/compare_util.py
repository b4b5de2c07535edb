"""Helpers shared by bench/compare.py, compare_fusion.py and compare_hosts.py:
sizes, formatting, reading and running one benchmark invocation, medians, load lines and
the exit status. Standard library only.
"""
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

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


def json_rows(text):
    """The JSON objects of a benchmark's output, one per line starting with
    "{" (other lines, and lines that do not parse, are skipped): (rows,
    summary), summary the last object with "summary" true, or None."""
    rows, summary = [], None
    for line in text.splitlines():
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
    return rows, summary


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
    rows, summary = json_rows(out)
    if verbose:
        print("  (%.1fs, exit %d)" % (time.monotonic() - start, proc.returncode), file=sys.stderr,
              flush=True)
    if proc.returncode not in (0, 1) or (summary is None and (require_summary or not rows)):
        tail = "\n".join((err or out).strip().splitlines()[-15:])
        return rows, summary, "exit status %d\n%s" % (proc.returncode, tail)
    return rows, summary, None


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


def run_beside(load, key, fn, *args, **kwargs):
    """fn(*args, **kwargs), with --load's load beside it when there is one."""
    return load.run(key, fn, *args, **kwargs) if load else fn(*args, **kwargs)


def print_load(load, n, configs, report):
    """The line saying what the load got done beside each configuration."""
    if not load:
        return
    lines = (
        (load.fraction, "load beside every run: %s; its work per second beside each "
         "configuration as a fraction of alone (median of runs)" % load.describe()),
        (load.lost, "seconds of the load's work lost beside each configuration's whole run, "
         "launch included (its time beside it less what that work takes alone; the same "
         "collective work for every configuration; median of runs)"),
        (load.cpu, "CPU seconds the benchmark's processes used beside the load (user + "
         "system, launcher and ranks, launch included; the same collective work for every "
         "configuration; median of runs)"))
    for median, text in lines:
        cells = []
        for c in configs:
            v = median((n, c))
            cells.append("%s %s" % (c, "-" if v is None else "%.2f" % v))
        print("## %s: %s" % (text, ", ".join(cells)))
    report.setdefault("load", {"kind": load.kind, "workers": load.workers, "alone": load.alone,
                               "fractions": {}, "lost_s": {}, "cpu_s": {}})
    for c in configs:
        report["load"]["fractions"]["%d/%s" % (n, c)] = load.fractions((n, c))
        report["load"]["lost_s"]["%d/%s" % (n, c)] = load.losts((n, c))
        report["load"]["cpu_s"]["%d/%s" % (n, c)] = load.cpus((n, c))


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
