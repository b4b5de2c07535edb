#!/usr/bin/env python3
"""The fault suite: every fault x transport x size class x rank count, each a
real job started by chorusrun (tests/faults/fault_rank.c), and the verdict
every rank reached, its result code and how long after the fault it came.

A case fails when a rank hangs (no verdict before the job's own limit), when
ranks disagree (different codes), when a rank succeeds where a peer failed,
when the code is not the fault's, when a verdict comes later than the fault's
bound (which never depends on CHORUS_TIMEOUT where a peer has already failed,
left or disagreed), or when a successful result is wrong. It prints one table
row per case and, last, "N cases, N failed".

  fault_suite.py --chorusrun PATH --rank PATH [--faults a,b] [--transports tcp,shm]
                 [--sizes latency,pipeline] [--np 2,3] [--collectives allreduce,...]
                 [--hosts H [--algo SPEC]] [--repeat N] [--jobs N] [--json FILE]

The call under test is an allreduce unless --collectives names others (or
"all"): each fault that applies to a collective (applies()) runs with it.

--jobs N runs N cases at once, for the faults whose cases mostly wait out
deadlines (stopped, stalled), when the machine is otherwise idle: their ranks
sleep while they wait, so the cases barely share the CPUs.

--repeat N runs every case N times: killed-during kills its victim at a random
moment of the call (fault_rank.c), so that the survivors' verdicts, which
must agree (CHORUS_AGREE=1, the verdict round), are tried at many points.

--hosts H splits each job's ranks into H simulated hosts (CHORUS_HOST_ID,
host = rank * H / np: at 3 ranks on 2 hosts the victim, rank 2, is alone on
its host and so its representative; at 4 it is the second rank of its
host), so that the hierarchical algorithms run; --algo sets CHORUS_ALGO to
choose them (the suite otherwise clears it).
"""
import argparse
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import time

# The size classes: a call on the latency path (16 floats) and one on the
# pipelined path (1 MiB of floats).
SIZES = {"latency": 16, "pipeline": 262144}

CHORUS_TIMEOUT_S = 20  # the deadline of every call but the stalled cases'
STALL_TIMEOUT_S = 2    # stalled / early-timeout: the deadline is the fault
FAST_MS = 5000         # a peer's failure must reach every rank within this

# fault: (code every rank that makes the call must get, does the victim make
# a call, bound in ms after the fault)
FAULTS = {
    "none": (0, True, FAST_MS),
    "killed": (4, False, FAST_MS),
    # The victim dies as its call returns: every rank finishes that call.
    "killed-after": (0, True, FAST_MS),
    # The victim dies in the middle of its call (or just after it): the
    # survivors may finish the call or fail it, but all the same way (None:
    # either code, the same on every survivor). Needs CHORUS_AGREE=1.
    "killed-during": (None, False, FAST_MS),
    # As killed-during, with rank victim - 1 dying too at its own moment:
    # two failures within one call (3 ranks and more).
    "killed-during-two": (None, False, FAST_MS),
    # The victim shuts down its connections (as a network that drops them)
    # at a random moment of its call, alive: every rank, the victim too,
    # finishes the call or fails it, all the same way. Needs CHORUS_AGREE=1.
    "disconnected": (None, True, FAST_MS),
    "exited": (4, False, FAST_MS),
    "destroyed": (4, False, FAST_MS),
    "aborted": (9, False, FAST_MS),
    "stalled": (3, True, (2 * STALL_TIMEOUT_S) * 1000 + FAST_MS),
    "early-timeout": (3, True, FAST_MS),
    # The victim's deadline passes at a random moment of the others' call:
    # all finish it (the victim's part was sent), or all time out.
    "deadline-during": ((0, 3), True, FAST_MS),
    # The victim is stopped whole (SIGSTOP) just before its call, or at a
    # random moment of it, until three deadlines later: the others' deadline
    # passes while it cannot answer. All time out, or all finish the call
    # (its part was sent, or they need none).
    "stopped": ((0, 3), True, 3 * STALL_TIMEOUT_S * 1000 + FAST_MS),
    "stopped-during": ((0, 3), True, 3 * STALL_TIMEOUT_S * 1000 + FAST_MS),
    # The victim, the releaser of a rooted call over TCP (its root, or the
    # ring broadcast's last rank), is stopped as in stopped right after its
    # first release went out: one rank released, the others' deadline
    # passing while they wait for theirs. Every rank's result was in place
    # before that release: all finish the call.
    "stopped-releasing": (0, True, 3 * STALL_TIMEOUT_S * 1000 + FAST_MS),
    "kind": (5, True, FAST_MS),
    "count": (5, True, FAST_MS),
    "dtype": (5, True, FAST_MS),
    "op": (5, True, FAST_MS),
    "root": (5, True, FAST_MS),
    "bad-argument": (1, True, FAST_MS),
    "allgather-in-place": (1, True, FAST_MS),
    "wrong-token": (0, True, FAST_MS),
    "malformed-frame": (4, True, FAST_MS),
    "truncated": (4, True, FAST_MS),
    # No verdicts: chorusrun's guard kills every rank; the bound is on the
    # last rank's death, and the store (hosted by chorusrun) goes with it.
    "launcher-killed": (None, True, FAST_MS),
}
# Faults also tried with the call a tensor given to the fusion engine
# (chorus_fused_allreduce, after a fused warm-up that set the engine up), on
# 3 ranks at the latency size: a peer's failure fails the pending tensor; a
# tensor one rank lacks fails at CHORUS_TIMEOUT naming it and the rank.
FUSED = {"none", "killed", "exited", "destroyed", "aborted", "stalled", "count", "dtype", "op",
         "bad-argument"}
# The collectives fault_rank.c can make its call under test, and the faults
# that apply to each beyond allreduce (root and allgather-in-place are calls
# of their own; the store and launcher faults do not depend on the call).
COLLECTIVES = ["allreduce", "broadcast", "allgather", "reduce_scatter", "alltoall", "reduce",
               "gather", "scatter", "barrier", "allgatherv", "reduce_scatterv"]
REDUCING = {"allreduce", "reduce_scatter", "reduce", "reduce_scatterv"}
ROOTED = {"broadcast", "reduce", "gather", "scatter"}


def applies(fault, collective):
    if fault == "stopped-releasing":
        return collective in ROOTED
    if collective == "allreduce":
        return True
    if fault in ("root", "allgather-in-place", "wrong-token", "launcher-killed"):
        return False
    if fault == "op":
        return collective in REDUCING
    if fault in ("count", "dtype", "bad-argument"):
        return collective != "barrier"
    return True


# Faults that need the connections to be the transport's own TCP sockets
# (fault_rank.c finds them by the process's sockets): not over UCX, but for
# disconnected on several (simulated) hosts, where UCX's own connections are
# TCP sockets too and the victim cuts them with the control channel's.
TCP_ONLY = {"malformed-frame", "truncated", "disconnected"}
# Cases whose cause is known and not fixed yet: reported as "open" with the
# reason, not counted as failures; one that passes is reported so that the
# entry goes. Keys: (fault, transport, size, np), None matching any.
KNOWN_OPEN = {}


def known_open(fault, transport, size, np):
    for (f, t, s, n), reason in KNOWN_OPEN.items():
        if f == fault and t == transport and s in (None, size) and n in (None, np):
            return reason
    return None


CODE_NAMES = {0: "ok", 1: "INVALID_ARGUMENT", 2: "INVALID_USAGE", 3: "TIMEOUT",
              4: "PEER_FAILURE", 5: "MISMATCH", 6: "IO", 9: "ABORTED", 10: "INTERNAL"}

VERDICT = re.compile(r"^(?:\[\d+\] )?verdict (\d+) (-?\d+) (\d+) :: (.*)$")
FAULT = re.compile(r"^(?:\[\d+\] )?fault (\d+) (\d+)$")


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def run_launcher_killed(cmd, env, limit):
    """Starts the job, SIGKILLs chorusrun once the ranks are in the call, and
    returns (stdout, stderr, hung, {rank: ms after the kill it was gone})."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, pids, deadline = [], {}, time.time() + limit
    for line in proc.stdout:
        out.append(line)
        m = re.match(r"^(?:\[\d+\] )?pid (\d+) (\d+)$", line.strip())
        if m:
            pids[int(m.group(1))] = int(m.group(2))
        if FAULT.match(line.strip()) or time.time() > deadline:
            break
    time.sleep(0.3)  # the others are inside the call now
    killed_at = time.time()
    proc.kill()
    gone = {}
    while len(gone) < len(pids) and time.time() < killed_at + limit:
        for r, pid in pids.items():
            if r not in gone and not pid_alive(pid):
                gone[r] = int((time.time() - killed_at) * 1000)
        time.sleep(0.01)
    rest = proc.communicate()
    survivors = [pid for r, pid in pids.items() if r not in gone]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    return "".join(out) + rest[0], rest[1], bool(survivors), gone


def run_case(args, fault, transport, size, np, form, collective):
    code, victim_calls, bound_ms = FAULTS[fault]
    count = SIZES[size] if size in SIZES else int(size)
    if fault == "stopped-releasing" and count * 4 >= 256 << 10:
        code = (0, 3)  # CHORUS_AGREE's round follows the release: all may time out
    # The first rank and the last both get to fail. stopped-releasing stops
    # the releaser: the root (rank 0), but for the ring broadcast (which 16
    # floats over TCP take) the chain's last rank.
    victim = 0 if np == 2 else np - 1
    if fault == "stopped-releasing" and collective != "broadcast":
        victim = 0
    short = ("stalled", "early-timeout", "stopped", "stopped-during", "stopped-releasing")
    timeout_s = STALL_TIMEOUT_S if fault in short else CHORUS_TIMEOUT_S
    env = dict(os.environ, CHORUS_TRANSPORT=transport, CHORUS_TIMEOUT=str(timeout_s))
    env.pop("CHORUS_ALGO", None)
    if args.algo:
        env["CHORUS_ALGO"] = args.algo
    rank_cmd = [args.rank]
    if args.hosts > 1:  # exec keeps the pid that fault_rank.c prints
        rank_cmd = ["sh", "-c", f'CHORUS_HOST_ID=host$((CHORUS_RANK * {args.hosts} / {np})) '
                    'exec "$0" "$@"', args.rank]
    cmd = [args.chorusrun, "-np", str(np), *rank_cmd, fault, str(victim), str(count), form,
           collective]
    started = time.time()
    limit = 4 * timeout_s + 30  # a hang: far past any deadline the job has
    if fault == "launcher-killed":
        out, err, survived, gone = run_launcher_killed(cmd, env, limit)
        problems = [] if len(gone) == np else [f"ranks never seen or survived: {np - len(gone)}"]
        if survived:
            problems.append("rank processes survived chorusrun")
        late = {r: ms for r, ms in gone.items() if ms > bound_ms}
        if late:
            problems.append(f"ranks outlived chorusrun by more than {bound_ms} ms: {late}")
        return {
            "fault": fault, "transport": transport, "size": size, "np": np, "form": form,
            "collective": collective, "expected": None, "codes": {r: "killed" for r in gone},
            "lag_ms": gone,
            "messages": {}, "problems": problems, "stdout": out[-3000:], "stderr": err[-3000:],
        }
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit)
        out, err, hung = proc.stdout, proc.stderr, False
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        hung = True
    verdicts, fault_at = {}, None
    for line in out.splitlines():
        m = VERDICT.match(line)
        if m:
            verdicts[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), m.group(4))
        m = FAULT.match(line)
        if m:
            t = int(m.group(2))
            fault_at = t if fault_at is None else min(fault_at, t)
    if fault_at is None:
        fault_at = int(started * 1000)
    victims = [victim, victim - 1] if fault == "killed-during-two" else [victim]
    if fault.startswith("killed-during"):  # it may have returned before it died: moot
        for v in victims:
            verdicts.pop(v, None)
    expected = [r for r in range(np) if r not in victims or victim_calls]
    problems = []
    if hung:
        problems.append(f"hung: no end after {limit} s")
    missing = [r for r in expected if r not in verdicts]
    if missing:
        problems.append(f"no verdict from rank(s) {missing}")
    codes = {r: verdicts[r][0] for r in verdicts}
    if len(set(codes.values())) > 1:
        problems.append("ranks disagree: " + ", ".join(f"{r}:{c}" for r, c in sorted(codes.items())))
        if 0 in codes.values():
            problems.append("a rank succeeded where a peer failed")
    allowed = (0, 4) if code is None else code if isinstance(code, tuple) else (code,)
    wrong_codes = {r: c for r, c in codes.items() if c not in allowed}
    if wrong_codes and len(set(codes.values())) == 1:
        problems.append(f"code {list(codes.values())[0]}, expected {code}")
    lags = {r: verdicts[r][1] - fault_at for r in verdicts}
    late = {r: lag for r, lag in lags.items() if lag > bound_ms}
    if late:
        problems.append(f"late verdicts (ms after the fault, bound {bound_ms}): {late}")
    # The stuck-rank report: a timeout says where the rank that was not there
    # was, first (it had finished the barrier, #2, and was in no call), or
    # which peer a rank in the same call waited on.
    if fault == "stalled" and form == "fused":
        for r, (c, _, msg) in sorted(verdicts.items()):
            if c == 3 and not (f"tensor 'grad'" in msg and f"not by rank {victim}" in msg):
                problems.append(f"rank {r}'s timeout does not name the tensor and rank {victim}: "
                                f"{msg[:200]}")
    elif form == "fused" and fault in ("killed", "exited", "destroyed", "aborted"):
        # The user submitted tensors, not calls: the verdict names the one it fails.
        for r, (c, _, msg) in sorted(verdicts.items()):
            if c != 0 and "tensor 'grad'" not in msg:
                problems.append(f"rank {r}'s failure does not name the tensor: {msg[:200]}")
    elif fault in ("stalled", "early-timeout"):
        absent = victim if fault == "stalled" else None
        for r, (c, _, msg) in sorted(verdicts.items()):
            if c != 3:
                continue
            first = msg.split(". ")[0]
            named = re.search(r"rank (\d+) is in no call: the last it finished is barrier #2", first)
            via = re.search(r"is in this call too \(#3\), waiting on rank (\d+)", first)
            who = int(named.group(1)) if named else int(via.group(1)) if via else None
            if who is None or (absent is not None and who != absent) or \
                    (fault == "early-timeout" and who == victim):
                problems.append(f"rank {r}'s timeout does not begin with where the absent rank was: {msg[:200]}")
    if fault == "killed-after":
        for r in expected:
            if r == victim:
                continue
            m = re.search(rf"^(?:\[\d+\] )?after {r} (-?\d+)$", out, re.M)
            if not m or int(m.group(1)) != 4:
                problems.append(f"rank {r}'s next call after the death: "
                                f"{'no verdict' if not m else 'code ' + m.group(1)}, expected 4")
    if fault == "stopped-releasing" and not re.search(rf"^(?:\[\d+\] )?release-stop {victim} 1$",
                                                      out, re.M):
        problems.append("the victim never stopped at a release (no frame without payload)")
    if fault == "wrong-token":
        for what in ("store", "hello"):
            if not re.search(rf"refused {what} {victim} 1", out):
                problems.append(f"the stranger with a wrong token was not refused by the {what}")
    if re.search(r"WRONG", out):
        problems.append("a wrong result")
    return {
        "fault": fault, "transport": transport, "size": size, "np": np, "form": form,
        "collective": collective, "expected": code, "codes": codes, "lag_ms": lags,
        "messages": {r: verdicts[r][2] for r in verdicts},
        "problems": problems, "stdout": out[-3000:], "stderr": err[-3000:],
        # Survivors that failed the call and took the result of one that
        # finished it (collectives/verdict/recover.hpp).
        "recovered": err.count("its result is taken"),
    }


def judge_and_print(args, results, r):
    fault, transport, size, np = r["fault"], r["transport"], r["size"], r["np"]
    form, collective = r["form"], r["collective"]
    open_reason = known_open(fault, transport, size, np)
    if open_reason:
        r["open"] = open_reason
        if r["problems"]:
            r["open_problems"], r["problems"] = r["problems"], []
        else:
            r["problems"] = ["passes, but is listed as open: remove it from KNOWN_OPEN"]
    results.append(r)
    codes = " ".join(f"{k}:{CODE_NAMES.get(v, v)}" for k, v in sorted(r["codes"].items()))
    slowest = max(r["lag_ms"].values()) if r["lag_ms"] else -1
    verdict = "ok" if not r["problems"] else "FAIL: " + "; ".join(r["problems"])
    if r.get("open_problems"):
        verdict = "open (" + r["open"] + "): " + "; ".join(r["open_problems"])
    print(f"{fault:<19} {collective:<15} {transport:<9} {size:<8} {np:>2} {form:<11} "
          f"{codes:<24} {slowest:>10}  {verdict}", flush=True)
    if r["problems"] or args.verbose:
        for rank, msg in sorted(r["messages"].items()):
            print(f"    rank {rank}: {msg[:300]}")
        if r["problems"]:
            print("    --- stdout\n" + r["stdout"] + "\n    --- stderr\n" + r["stderr"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--chorusrun", required=True)
    p.add_argument("--rank", required=True)
    p.add_argument("--faults", default=",".join(FAULTS))
    p.add_argument("--transports", default="tcp,shm")
    p.add_argument("--sizes", default=",".join(SIZES),
                   help="size classes (" + ", ".join(SIZES) + ") or counts of floats")
    p.add_argument("--np", default="2,3")
    p.add_argument("--collectives", default="allreduce",
                   help="comma-separated, or all: " + ", ".join(COLLECTIVES))
    p.add_argument("--hosts", type=int, default=1,
                   help="simulated hosts per job (CHORUS_HOST_ID = host<rank * H / np>)")
    p.add_argument("--algo", help="CHORUS_ALGO for every job (e.g. to choose hierarchical)")
    p.add_argument("--repeat", type=int, default=1,
                   help="run every case this many times (faults whose timing varies)")
    p.add_argument("--jobs", type=int, default=1,
                   help="cases run at once (for faults whose cases mostly wait)")
    p.add_argument("--json")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    faults = args.faults.split(",")
    for f in faults:
        if f not in FAULTS:
            sys.exit(f"unknown fault {f}; known: {', '.join(FAULTS)}")
    for s in args.sizes.split(","):
        if s not in SIZES and not s.isdigit():
            sys.exit(f"unknown size {s}; known: {', '.join(SIZES)}, or a count of floats")
    collectives = COLLECTIVES if args.collectives == "all" else args.collectives.split(",")
    for c in collectives:
        if c not in COLLECTIVES:
            sys.exit(f"unknown collective {c}; known: {', '.join(COLLECTIVES)}")
    results = []
    print(f"{'fault':<19} {'collective':<15} {'transport':<9} {'size':<8} {'np':>2} {'form':<11} "
          f"{'codes (rank:code)':<24} {'slowest ms':>10}  result")
    cases = []
    for fault, collective in ((f, c) for f in faults for c in collectives if applies(f, c)):
        for transport in args.transports.split(","):
            ucx_over_tcp = transport == "ucx" and args.hosts > 1
            if fault in TCP_ONLY and transport not in ("tcp", "shm") and not (
                    fault == "disconnected" and ucx_over_tcp):
                continue
            # The rooted algorithms over shared memory have no release to
            # stop at; UCX sends no frames through sendmsg.
            if fault == "stopped-releasing" and transport != "tcp":
                continue
            for size in args.sizes.split(","):
                for np in (int(n) for n in args.np.split(",")):
                    if fault == "killed-during-two" and np < 3:
                        continue  # no survivor
                    if fault == "stopped-releasing" and np < 3:
                        continue  # one release: nothing between two
                    # Two ranks wait blocking, three non-blocking: both forms
                    # and both counts without doubling the suite.
                    forms = ["blocking" if np == 2 else "nonblocking"]
                    if fault in FUSED and np == 3 and size == "latency" and \
                            collective == "allreduce":
                        forms.append("fused")
                    for form in forms:
                        cases += [(fault, transport, size, np, form, collective)] * args.repeat
    # Rows print in the order of the cases, whatever --jobs is.
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for future in [pool.submit(run_case, args, *case) for case in cases]:
            judge_and_print(args, results, future.result())
    failed = sum(1 for r in results if r["problems"])
    still_open = sum(1 for r in results if r.get("open_problems"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    recovered = sum(1 for r in results if r.get("recovered"))
    if recovered:
        print(f"{recovered} cases where a survivor that failed the call took the result of one "
              "that finished it")
    print(f"{len(results)} cases, {failed} failed, {still_open} known open")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
