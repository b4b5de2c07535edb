# SIGTERM, SIGINT and SIGHUP to chorusrun stop every rank (exit 128 + the
# signal); ranks that ignore SIGTERM get SIGKILL after the grace period, and
# chorusrun says so.
. "$(dirname "$0")/common.sh"

# Starts chorusrun with `np` ranks running `body` in the background (pid in
# $job) with SIGINT at its default disposition (a shell's background jobs
# start with it ignored), then waits until every rank has written its ready
# file: whatever the body set up before (a trap) is in place.
start_job() {
  local np=$1 body=$2
  rm -f "$TMP"/ready.*
  env --default-signal=INT "$CHORUSRUN" -np "$np" bash -c "$body" 2>"$TMP/err" &
  job=$!
  wait_for_files "$TMP/ready" "$np" || fail "ranks did not start: $(cat "$TMP/err")"
}

for sig in TERM INT HUP; do
  start_job 3 "(exec -a $MARKER sleep 60) & touch $TMP/ready.\$CHORUS_RANK; wait"
  kill -$sig $job
  wait $job
  rc=$?
  want=$((128 + $(kill -l $sig)))
  [ $rc = $want ] || fail "SIG$sig: exit status $rc, expected $want"
  grep -q "received SIG$sig; stopping the job" "$TMP/err" || fail "SIG$sig: no message"
  expect_no_leftovers
done

# Ranks that ignore SIGTERM (the trap is set before they say they are ready)
# are killed after the grace period (2 s).
start=$(date +%s.%N)
CHORUS_LOG_LEVEL=debug start_job 2 "trap '' TERM; touch $TMP/ready.\$CHORUS_RANK; exec -a $MARKER sleep 60"
kill -TERM $job
wait $job
rc=$?
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
cat "$TMP/err"
[ $rc = 143 ] || fail "exit status $rc, expected 143"
grep -q "2 rank(s) still running 2 s after SIGTERM; sending SIGKILL" "$TMP/err" ||
  fail "no escalation to SIGKILL"
[ "$(grep -cE "rank [01] \(pid [0-9]+\) killed by signal 9" "$TMP/err")" = 2 ] ||
  fail "the ranks did not end by SIGKILL"
awk -v e="$elapsed" 'BEGIN { exit !(e >= 2) }' || fail "stopped after ${elapsed}s, before the grace period"
expect_no_leftovers
echo PASS
