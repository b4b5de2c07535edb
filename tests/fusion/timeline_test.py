#!/usr/bin/env python3
"""The fusion timeline end to end: runs the hidden [.timeline] case of
fusion_tests with CHORUS_TIMELINE set (2 thread ranks, 40 tensors, 3 steps),
then checks that each rank's trace parses as JSON and holds every phase
(submitted, negotiate, copy_in, allreduce, copy_out) for every tensor at
every step, that the engine track names each allreduce's algorithm, and that
tools/chorus_timeline.py summarises and merges the traces.

  timeline_test.py FUSION_TESTS CHORUS_TIMELINE_PY
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

PHASES = ["submitted", "negotiate", "copy_in", "allreduce", "copy_out"]
TENSORS, STEPS, RANKS = 40, 3, 2


def main():
    exe, tool = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="chorus-timeline-")
    problems = []
    try:
        env = dict(os.environ, CHORUS_TIMELINE=os.path.join(tmp, "trace.json"))
        run = subprocess.run([exe, "[.timeline]"], env=env, capture_output=True, text=True,
                             timeout=90)
        if run.returncode != 0:
            print(run.stdout[-3000:], run.stderr[-3000:])
            return 1
        files = [os.path.join(tmp, f"trace.rank{r}.json") for r in range(RANKS)]
        for path in files:
            with open(path, encoding="utf-8") as f:
                events = json.load(f)  # must be valid JSON, closed
            tracks = {e["tid"]: e["args"]["name"] for e in events
                      if e.get("ph") == "M" and e.get("name") == "thread_name" and e["tid"] > 0}
            if len(tracks) != TENSORS:
                problems.append(f"{path}: {len(tracks)} tensor tracks, expected {TENSORS}")
            for tid, name in tracks.items():
                seen = [e["name"] for e in events if e.get("tid") == tid and e.get("ph") in "Xi"]
                for phase in PHASES:
                    if seen.count(phase) != STEPS:
                        problems.append(f"{path}: tensor {name}: {seen.count(phase)} '{phase}' "
                                        f"events, expected {STEPS}")
                for e in events:
                    if e.get("tid") == tid and e.get("ph") == "X" and e["dur"] < 0:
                        problems.append(f"{path}: {name}: negative duration {e}")
            engine = [e for e in events if e.get("tid") == 0 and e.get("ph") == "X"]
            reduces = [e for e in engine if e["name"] == "allreduce"]
            if not reduces:
                problems.append(f"{path}: no allreduce on the engine track")
            for e in reduces:
                if not e.get("args", {}).get("algorithm") or e["args"].get("bytes", 0) <= 0:
                    problems.append(f"{path}: allreduce without algorithm or bytes: {e}")
            if not any(e["name"] == "negotiate" for e in engine):
                problems.append(f"{path}: no negotiation rounds on the engine track")
        merged = os.path.join(tmp, "merged.json")
        summary = subprocess.run([sys.executable, tool, *files, "--per-rank", "--merge", merged],
                                 capture_output=True, text=True, timeout=60)
        print(summary.stdout)
        if summary.returncode != 0:
            problems.append(f"chorus_timeline.py exited {summary.returncode}: {summary.stderr}")
        for word in ["negotiate", "copy_in", "allreduce", "copy_out", f"{TENSORS * RANKS} tensor"]:
            if word not in summary.stdout:
                problems.append(f"the summary does not mention {word!r}")
        with open(merged, encoding="utf-8") as f:
            pids = {e.get("pid") for e in json.load(f)}
        if pids != set(range(RANKS)):
            problems.append(f"merged trace has pids {pids}")
        # A trace cut short (a rank killed before it closed the file) is read too.
        with open(files[0], encoding="utf-8") as f:
            text = f.read()
        cut = os.path.join(tmp, "cut.json")
        with open(cut, "w", encoding="utf-8") as f:
            f.write(text[: len(text) * 2 // 3])
        partial = subprocess.run([sys.executable, tool, cut], capture_output=True, text=True,
                                 timeout=60)
        if partial.returncode != 0:
            problems.append(f"a cut trace is not read: {partial.stderr}")
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w", encoding="utf-8") as f:
            f.write("not a trace")
        if subprocess.run([sys.executable, tool, bad], capture_output=True,
                          timeout=60).returncode != 2:
            problems.append("a file that is not a trace is not refused")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for p in problems:
        print("FAIL:", p)
    print("timeline: ok" if not problems else f"timeline: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
