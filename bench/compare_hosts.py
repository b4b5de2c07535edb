#!/usr/bin/env python3
"""Allreduce across simulated hosts: Chorus's algorithms and Open MPI, side by side.

Creates H simulated hosts (tests/netns/simhosts.sh: network namespaces on a
bridge, each host's egress limited by tbf to --rate), then runs, --runs times
and interleaved (so drift in the machine's speed hits every configuration
alike), every configuration on the same sizes:

  chorus:ALGO:MAP  chorusrun -H h0:R,h1:R,... --map-by MAP --launch-agent
                   'ip netns exec {host}' chorus-bench allreduce -a ALGO
  ompi-tuned       mpirun on the same namespaces (its daemons started through
                   the same `ip netns exec`), Open MPI's default coll tuned
  ompi-han         the same with coll han first (--mca coll_han_priority 100)

It prints per size the median busbw of each, and for `auto` (map slot): its
share of the ceiling, its ratio to the flat ring, to Open MPI's best, to the
best fixed Chorus algorithm, and auto with --map-by node against slot.

The ceiling: every host must send at least 2(H-1)/H of the buffer across its
link, so algbw <= rate * H / (2(H-1)); busbw is algbw * 2(n-1)/n.

--hosts 1 runs the same configurations on this machine without namespaces
(chorusrun -np R; Open MPI over vader), the one-host half of the comparison.

  bench/compare_hosts.py --build-dir build --hosts 2 --ranks-per-host 2 --rate 1gbit
  bench/compare_hosts.py --hosts 1 --ranks-per-host 4 --max 64M

Needs root (network namespaces) for --hosts > 1. Exit status: 0, 2 on a failed run.
"""
import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_util import default_build_dir, fmt_bytes, median_or_none, parse_bytes, run_one  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_ALGOS = "auto,ring,ring_by_host,rabenseifner,double_binary_tree,hierarchical"


def find_simhosts(build):
    for root in (REPO, os.path.dirname(os.path.abspath(build))):
        path = os.path.join(root, "tests", "netns", "simhosts.sh")
        if os.path.exists(path):
            return path
    return None


def rate_bytes_per_s(rate):
    units = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3}
    for unit, scale in units.items():
        if rate.endswith(unit):
            return float(rate[:-len(unit)]) * scale / 8
    raise ValueError(rate)


class SimHosts:
    """The namespaces of this run, removed on exit, error or signal."""

    def __init__(self, script, count, rate):
        self.script = script
        self.env = dict(os.environ, SIMHOSTS_ID=str(os.getpid()))
        out = subprocess.run(["bash", script, "up", str(count), rate], env=self.env,
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError("simhosts.sh up failed (exit %d): %s"
                               % (out.returncode, out.stderr.strip()))
        self.names = out.stdout.split()

    def down(self):
        subprocess.run(["bash", self.script, "down"], env=self.env)
        # The Open MPI agent's vader backing directories, one per host.
        for name in self.names:
            shutil.rmtree(os.path.join("/dev/shm", "ompi-" + name), ignore_errors=True)


def ompi_agent(tmpdir):
    """mpirun's rsh agent for namespaces: runs orted inside the host's
    namespace. Each host gets its own vader backing directory, since every
    namespace shares this machine's /dev/shm and hostname, and Open MPI names
    its segments after the hostname."""
    path = os.path.join(tmpdir, "netns-agent")
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\nhost=$1; shift\nmkdir -p /dev/shm/ompi-$host\n"
                 "OMPI_MCA_btl_vader_backing_directory=/dev/shm/ompi-$host exec "
                 "ip netns exec \"$host\" /bin/sh -c \"$*\"\n")
    os.chmod(path, 0o755)
    return path


def build_configs(args, build, hosts, tmpdir):
    """(name, command) for every configuration."""
    chorusrun = os.path.join(build, "tools", "chorusrun")
    bench = os.path.join(build, "bench", "chorus-bench")
    mpi_bench = os.path.join(build, "bench", "mpi_allreduce_bench")
    common = ["-b", str(parse_bytes(args.min)), "-e", str(parse_bytes(args.max)),
              "-f", str(args.factor), "-n", str(args.iters), "-w", str(args.warmup),
              "--iter-bytes", args.iter_bytes, "-c", str(args.check), "--json"]
    r = args.ranks_per_host
    in_ns = ["ip", "netns", "exec", hosts[0]] if hosts else []
    configs = []
    maps = ["slot", "node"] if hosts else ["slot"]
    for algo in args.algos.split(","):
        for map_by in maps:
            if map_by == "node" and algo not in ("auto", "ring"):
                continue
            if hosts:
                launch = in_ns + [chorusrun, "-H", ",".join("%s:%d" % (h, r) for h in hosts),
                                  "--map-by", map_by, "--launch-agent", "ip netns exec {host}"]
            else:
                launch = [chorusrun, "-np", str(r)]
            configs.append(("chorus:%s:%s" % (algo, map_by),
                            launch + [bench, "allreduce", "-a", algo, "--no-limit"] + common))
    if not args.no_ompi and os.access(mpi_bench, os.X_OK):
        mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
        if hosts:
            subnet = "10.250.0.0/24"
            mpirun = in_ns + mpirun + [
                "-H", ",".join("%s:%d" % (h, r) for h in hosts),
                "--mca", "plm_rsh_agent", ompi_agent(tmpdir),
                "--mca", "btl", "tcp,self,vader", "--mca", "btl_tcp_if_include", subnet,
                "--mca", "oob_tcp_if_include", subnet]
        else:
            mpirun += ["-np", str(r), "--mca", "pml", "ob1", "--mca", "btl", "vader,self"]
        configs.append(("ompi-tuned", mpirun + [mpi_bench] + common))
        configs.append(("ompi-han", mpirun + ["--mca", "coll_han_priority", "100", mpi_bench]
                        + common))
    return configs


def report(results, args, hosts_count, nranks):
    sizes = sorted({s for rows in results.values() for s in rows})
    names = list(results)
    med = {n: {s: median_or_none(results[n].get(s, [])) for s in sizes} for n in names}
    ceiling = None
    if hosts_count > 1:
        algbw = rate_bytes_per_s(args.rate) * hosts_count / (2 * (hosts_count - 1)) / 1e9
        ceiling = algbw * 2 * (nranks - 1) / nranks
    print("# busbw GB/s, median of %d runs; %d hosts x %d ranks%s" % (
        args.runs, hosts_count, args.ranks_per_host,
        ", link %s, busbw ceiling %.4f GB/s" % (args.rate, ceiling) if ceiling else ""))
    short = [n.replace("chorus:", "").replace(":slot", "") for n in names]
    print("%9s " % "size" + " ".join("%12s" % s[:12] for s in short))
    for s in sizes:
        print("%9s " % fmt_bytes(s) + " ".join(
            "%12s" % ("-" if med[n][s] is None else "%.4f" % med[n][s]) for n in names))
    auto = med.get("chorus:auto:slot")
    if not auto:
        return
    fixed = [n for n in names if n.startswith("chorus:") and n.endswith(":slot")
             and n != "chorus:auto:slot"]
    ompi = [n for n in names if n.startswith("ompi")]
    print("\n# auto against: best fixed Chorus algorithm (which), flat ring (rank order), "
          "Open MPI's best, auto --map-by node%s" % (", ceiling" if ceiling else ""))
    for s in sizes:
        a = auto[s]
        if a is None:
            continue
        best = max(((med[n][s], n) for n in fixed if med[n][s] is not None), default=None)
        cols = ["%9s" % fmt_bytes(s)]
        cols.append("fixed %.2f (%s)" % (a / best[0], best[1].split(":")[1]) if best else "-")
        ring = med.get("chorus:ring:slot", {}).get(s)
        cols.append("ring %.2f" % (a / ring) if ring else "ring -")
        ob = max((med[n][s] for n in ompi if med[n][s] is not None), default=None)
        cols.append("ompi %.2f" % (a / ob) if ob else "ompi -")
        node = med.get("chorus:auto:node", {}).get(s)
        cols.append("node/slot %.2f" % (node / a) if node else "node -")
        if ceiling:
            cols.append("ceiling %.0f%%" % (100 * a / ceiling))
        print("  ".join(cols))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--build-dir", default=default_build_dir())
    ap.add_argument("--hosts", type=int, default=2, help="simulated hosts (1: this machine)")
    ap.add_argument("--ranks-per-host", type=int, default=2)
    ap.add_argument("--rate", default="1gbit", help="each host's egress (tbf)")
    ap.add_argument("--algos", default=DEFAULT_ALGOS, help="chorus-bench -a values")
    ap.add_argument("--no-ompi", action="store_true", help="leave Open MPI out")
    ap.add_argument("--min", default="8")
    ap.add_argument("--max", default="256M")
    ap.add_argument("--factor", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iter-bytes", default="512M")
    ap.add_argument("--check", type=int, choices=(0, 1), default=0)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per invocation")
    ap.add_argument("--json-out", help="write every run's rows and the medians here")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    build = args.build_dir
    sim = None
    hosts = []
    if args.hosts > 1:
        script = find_simhosts(build)
        if not script:
            print("compare_hosts.py: tests/netns/simhosts.sh not found", file=sys.stderr)
            return 2
        try:
            sim = SimHosts(script, args.hosts, args.rate)
        except RuntimeError as e:
            print("compare_hosts.py: %s" % e, file=sys.stderr)
            return 2
        hosts = sim.names
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    failures = []
    results = {}
    try:
        with tempfile.TemporaryDirectory() as tmpdir:
            configs = build_configs(args, build, hosts, tmpdir)
            for run in range(args.runs):
                for name, cmd in configs:
                    if args.verbose:
                        print("# run %d: %s" % (run + 1, " ".join(map(shlex.quote, cmd))),
                              file=sys.stderr, flush=True)
                    rows, _, error = run_one(cmd, args.timeout, False)
                    if error:
                        failures.append("%s: %s" % (name, error))
                        continue
                    for row in rows:
                        results.setdefault(name, {}).setdefault(row["size"], []).append(
                            row["busbw_gbps"])
    finally:
        if sim:
            sim.down()
    report(results, args, max(args.hosts, 1), args.hosts * args.ranks_per_host)
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump({"args": vars(args), "busbw_gbps": results}, fh, indent=1)
    for f in failures:
        print("# FAILED " + "\n#   ".join(f.splitlines()[:6]))
    return 2 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
