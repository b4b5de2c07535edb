# SIGTERM to chorusrun stops every rank; ranks that ignore SIGTERM get SIGKILL.
. "$(dirname "$0")/common.sh"

wait_for_ranks() {
  for _ in $(seq 100); do
    [ "$(pgrep -fc "$MARKER")" -ge "$1" ] && return 0
    sleep 0.1
  done
  fail "ranks did not start"
}

"$CHORUSRUN" -np 3 bash -c "(exec -a $MARKER sleep 60) & wait" &
pid=$!
wait_for_ranks 3
kill -TERM $pid
wait $pid
rc=$?
[ $rc = 143 ] || fail "exit status $rc, expected 143 (128 + SIGTERM)"
expect_no_leftovers

# Ranks that ignore SIGTERM are killed after the grace period.
start=$SECONDS
"$CHORUSRUN" -np 2 bash -c "trap '' TERM; exec -a $MARKER sleep 60" &
pid=$!
wait_for_ranks 2
kill -TERM $pid
wait $pid
rc=$?
[ $rc = 143 ] || fail "exit status $rc, expected 143"
[ $((SECONDS - start)) -lt 10 ] || fail "stopping took too long"
expect_no_leftovers
echo PASS
