# chorus-tune and the tuning file: a short sweep on 4 ranks writes a file in
# which every entry's winner is its fastest measurement; a hand-written file
# is obeyed by the plan and by a job, and a malformed one fails init naming
# the file. Usage: chorus-tune.sh CHORUS_TUNE CHORUSRUN CHORUS_INFO CHORUS_BENCH
set -uo pipefail
tune=$1 chorusrun=$2 info=$3 bench=$4
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# (a) The sweep, within its budget.
start=$SECONDS
out=$(timeout 60 "$chorusrun" -np 4 --timeout 55 "$tune" -o "$dir/tune.json" \
  --collectives allreduce,broadcast,allgather -b 8 -e 1M -f 8 --budget-ms 5 2>&1) ||
  fail "chorus-tune: exit status $?: $out"
[ $((SECONDS - start)) -lt 60 ] || fail "chorus-tune took $((SECONDS - start)) s"
grep -q "^# wrote $dir/tune.json" <<<"$out" || fail "chorus-tune wrote nothing: $out"
python3 - "$dir/tune.json" <<'PY' || fail "tuning file checks: $(cat "$dir/tune.json")"
import json, sys
t = json.load(open(sys.argv[1]))
assert t["version"] == 1, t
by = {}
for e in t["entries"]:
    times = e["times_us"]
    assert e["algorithm"] in times, e
    assert times[e["algorithm"]] == min(times.values()), e
    assert e["ranks"] == 4 and e["hosts"] == 1, e
    by.setdefault(e["collective"], []).append(e)
assert sorted(by) == ["allgather", "allreduce", "broadcast"], sorted(by)
for name, entries in by.items():  # each collective's ranges tile [0, inf)
    assert entries[0]["lo"] == 0 and entries[-1]["hi"] is None, entries
    for a, b in zip(entries, entries[1:]):
        assert a["hi"] == b["lo"] and a["algorithm"] != b["algorithm"], (a, b)
PY
# The file it wrote loads: a job with it runs.
CHORUS_TUNING_FILE="$dir/tune.json" timeout 60 "$chorusrun" -np 4 --timeout 55 "$bench" allreduce \
  -b 8 -e 64K -f 8 -n 2 -w 1 -c 1 >/dev/null 2>&1 || fail "a job with the written file failed"

# Two simulated hosts (CHORUS_HOST_ID per rank): the hierarchical allreduce
# is timed with each algorithm between hosts, and the file loads there.
printf '#!/bin/bash\nexport CHORUS_HOST_ID=h$((CHORUS_RANK / 2))\nexec "$@"\n' >"$dir/two-hosts"
chmod +x "$dir/two-hosts"
out=$(timeout 60 "$chorusrun" -np 4 --timeout 55 "$dir/two-hosts" "$tune" -o "$dir/hosts.json" \
  --collectives allreduce -b 8 -e 64K -f 64 --budget-ms 5 2>&1) || fail "two hosts: $?: $out"
python3 - "$dir/hosts.json" <<'PY' || fail "two hosts: $(cat "$dir/hosts.json")"
import json, sys
t = json.load(open(sys.argv[1]))
for e in t["entries"]:
    assert e["hosts"] == 2, e
    assert "hierarchical(across=ring)" in e["times_us"], e
    assert e["times_us"][e["algorithm"]] == min(e["times_us"].values()), e
link = t["links"]["other_host"]  # what the job's probe measured
assert link["alpha_us"] > 0 and link["gbps"] > 0, link
PY
out=$(CHORUS_TUNING_FILE="$dir/hosts.json" CHORUS_LOG_LEVEL=info timeout 60 "$chorusrun" -np 4 \
  --timeout 55 "$dir/two-hosts" "$bench" allreduce -b 8 -e 64K -f 8 -n 2 -w 1 -c 1 2>&1) ||
  fail "a job on two hosts with the written file failed: $out"
# The file's link stands in for the probe.
echo "$out" | grep -q "link between hosts probed" &&
  fail "the job probed the link although the tuning file gives it: $(echo "$out" | grep probed)"

# (b) A hand-written winner the model would not pick: ring at 8 bytes on one
# host (the model takes shared memory).
cat >"$dir/ring.json" <<'JSON'
{"version": 1, "entries": [{"collective": "allreduce", "ranks": 4, "hosts": 1, "lo": 0, "hi": null,
 "algorithm": "ring", "times_us": {"ring": 1.0, "shm": 2.0}}]}
JSON
out=$(CHORUS_TUNING_FILE="$dir/ring.json" "$info" --plan --np 4 2>&1) || fail "plan: $out"
grep -qE '^ +8 +ring .*tuning file chose ring' <<<"$out" || fail "plan ignores the file: $out"
out=$(CHORUS_TUNING_FILE="$dir/ring.json" CHORUS_LOG_LEVEL=debug timeout 60 "$chorusrun" -np 4 \
  --timeout 55 "$bench" allreduce -b 8 -e 8 -n 1 -w 0 -c 1 2>&1) || fail "job with ring.json: $out"
grep -q 'allreduce 8 bytes: ring (tuning file chose ring for 8 bytes (measured 1.0 us; next best shm 2.0 us)' \
  <<<"$out" || fail "the job did not take the file's choice: $out"
echo '{"version": 1, "entries": [{"collective": "allreduce"}]}' >"$dir/bad.json"
out=$(CHORUS_TUNING_FILE="$dir/bad.json" timeout 60 "$chorusrun" -np 2 --timeout 55 "$bench" \
  allreduce -b 8 -e 8 -n 1 -w 0 2>&1) && fail "a malformed file was accepted: $out"
grep -q "tuning file $dir/bad.json: entry 0: no 'ranks'" <<<"$out" || fail "no message naming the file: $out"
echo PASS
