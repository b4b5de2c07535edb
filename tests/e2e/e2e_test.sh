#!/usr/bin/env bash
# End-to-end checks through chorusrun. Usage: e2e_test.sh CASE CHORUSRUN E2E_RANK [EXAMPLE]
# Every case bounds its own time and leaves no process behind.
set -uo pipefail
case_name=$1 chorusrun=$2 e2e=$3 example=${4:-} example_cpp=${5:-}
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
fail() { echo "FAIL ($case_name): $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; tail -n 40 "$err"; exit 1; }

start=$(date +%s.%N)
case $case_name in
  example)
    timeout 120 "$chorusrun" -np 4 --tag-output "$example" 4194307 >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    [ "$(grep -c ': 0 wrong' "$out")" -eq 4 ] || fail "not every rank reported 0 wrong"
    ;;
  example-cpp)
    timeout 120 "$chorusrun" -np 3 "$example_cpp" >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    [ "$(grep -c 'C++ API: 0 wrong' "$out")" -eq 3 ] || fail "not every rank reported 0 wrong"
    ;;
  kill)
    np=4 victim=2
    timeout 60 "$chorusrun" -np $np "$e2e" kill $victim >"$out" 2>"$err"
    rc=$?
    elapsed=$(echo "$(date +%s.%N) - $start" | bc)
    [ $rc -ne 0 ] || fail "chorusrun exited 0 although rank $victim was killed"
    [ $rc -ne 124 ] || fail "timed out"
    for r in 0 1 3; do
      grep -q "^rank $r: allreduce failed: code 4 .*rank $victim" "$out" ||
        fail "rank $r did not report a peer failure naming rank $victim"
    done
    # Bound generous to CPU noise; the design target is a few seconds.
    awk -v e="$elapsed" 'BEGIN { exit !(e < 10) }' || fail "took ${elapsed}s (limit 10s)"
    echo "killed rank $victim: job ended in ${elapsed}s with status $rc"
    ;;
  mismatch)
    timeout 60 "$chorusrun" -np 3 "$e2e" mismatch 1 >"$out" 2>"$err"
    rc=$?
    [ $rc -ne 0 ] || fail "chorusrun exited 0"
    grep -Eq "code 5 .*rank 1 called allreduce #1 \(count 1001.*but rank [02] called allreduce #1 \(count 1000" "$out" ||
      grep -Eq "code 5 .*rank [02] called allreduce #1 \(count 1000.*but rank 1 called allreduce #1 \(count 1001" "$out" ||
      fail "no mismatch error naming both ranks and both calls"
    ;;
  stranger)
    timeout 60 "$chorusrun" -np 3 "$e2e" stranger >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    grep -q "was closed (refused)" "$out" || fail "the stranger was not refused"
    grep -q "refused connection from .*wrong job token" "$err" || fail "the refusal was not logged"
    [ "$(grep -c 'job completed' "$out")" -eq 3 ] || fail "the job did not complete on every rank"
    ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
# Nothing of the job may survive it.
sleep 0.2
left=$(pgrep -x "$(basename "$e2e")"; [ -n "$example" ] && pgrep -x "$(basename "$example")"
  [ -n "$example_cpp" ] && pgrep -x "$(basename "$example_cpp")")
[ -z "$left" ] || fail "processes left behind: $left"
echo "PASS ($case_name)"
