#!/usr/bin/env python3
"""Summarises the Chrome traces that CHORUS_TIMELINE=PATH writes (one per
rank: PATH.rank<N>.json; they open in Perfetto or chrome://tracing).

Per phase of a fused tensor (negotiate: submitted until every rank had it;
copy_in; allreduce; copy_out) it prints how many there were and their total,
median, 90th percentile and longest time; per rank with --per-rank. Then the
engine's own work: negotiation rounds by path (fast: the known-names bitmap
only; full: names exchanged) and the fused allreduces by algorithm, with
their bytes.

  chorus_timeline.py trace.rank0.json trace.rank1.json [--per-rank]
  chorus_timeline.py trace.rank*.json --merge all.json   # one trace, every rank

A trace cut short (a rank that died before closing it) is read as far as it
goes. Standard library only. Exit status 0, or 2 for a file that is not a
trace.
"""
import argparse
import json
import statistics
import sys

PHASES = ["negotiate", "copy_in", "allreduce", "copy_out"]


def read_trace(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        events = json.loads(text)
    except json.JSONDecodeError as e:
        # Cut short: the array was never closed. Chorus writes one event per
        # line; keep every complete one.
        lines = text.splitlines()
        if not lines or lines[0].strip() != "[":
            raise ValueError(f"{path}: not a Chrome trace: {e}") from None
        events = []
        for line in lines[1:]:
            try:
                events.append(json.loads(line.strip().rstrip(",")))
            except json.JSONDecodeError:
                break
    if not isinstance(events, list):
        raise ValueError(f"{path}: not a Chrome trace (a JSON array of events)")
    return events


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def phase_rows(events):
    """{phase: [duration us]} of the tensor tracks (tid > 0)."""
    rows = {p: [] for p in PHASES}
    for e in events:
        if e.get("ph") == "X" and e.get("tid", 0) > 0 and e.get("name") in rows:
            rows[e["name"]].append(float(e.get("dur", 0)))
    return rows


def print_phases(title, rows):
    print(title)
    print(f"  {'phase':<10} {'count':>7} {'total ms':>10} {'median us':>10} {'p90 us':>10} "
          f"{'max us':>10}")
    for phase in PHASES:
        d = rows[phase]
        if not d:
            print(f"  {phase:<10} {0:>7}")
            continue
        print(f"  {phase:<10} {len(d):>7} {sum(d) / 1000:>10.3f} {statistics.median(d):>10.1f} "
              f"{percentile(d, 0.9):>10.1f} {max(d):>10.1f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("traces", nargs="+")
    p.add_argument("--per-rank", action="store_true")
    p.add_argument("--merge", metavar="OUT")
    args = p.parse_args()
    per_file = []
    try:
        for path in args.traces:
            per_file.append((path, read_trace(path)))
    except (OSError, ValueError) as e:
        print(f"chorus_timeline: {e}", file=sys.stderr)
        return 2
    everything = [e for _, events in per_file for e in events]
    tensors = {(e.get("pid"), e.get("tid")) for e in everything
               if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("tid", 0) > 0}
    print(f"{len(per_file)} trace(s), {len(tensors)} tensor track(s)")
    print_phases("fused tensors, every rank:", phase_rows(everything))
    if args.per_rank:
        for path, events in per_file:
            print_phases(f"{path}:", phase_rows(events))
    rounds = {}
    algos = {}
    for e in everything:
        if e.get("ph") != "X" or e.get("tid", 0) != 0:
            continue
        a = e.get("args") or {}
        if e.get("name") == "negotiate":
            r = rounds.setdefault(a.get("path", "?"), [])
            r.append(float(e.get("dur", 0)))
        elif e.get("name") == "allreduce":
            key = (a.get("algorithm", "?"), a.get("dtype", "?"))
            s = algos.setdefault(key, [0, 0, 0, []])
            s[0] += 1
            s[1] += int(a.get("bytes", 0))
            s[2] += int(a.get("tensors", 0))
            s[3].append(float(e.get("dur", 0)))
    print("negotiation rounds:")
    for path, d in sorted(rounds.items()):
        print(f"  {path:<6} {len(d):>7} rounds, median {statistics.median(d):.1f} us, "
              f"total {sum(d) / 1000:.3f} ms")
    print("fused allreduces:")
    for (algo, dtype), (calls, nbytes, ntensors, d) in sorted(algos.items()):
        print(f"  {algo:<20} {dtype:<9} {calls:>6} calls, {ntensors:>7} tensors, "
              f"{nbytes / 2**20:>10.2f} MiB, median {statistics.median(d):.1f} us")
    if args.merge:
        with open(args.merge, "w", encoding="utf-8") as f:
            json.dump(everything, f)
        print(f"merged {len(everything)} events into {args.merge}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
