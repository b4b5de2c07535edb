# chorusrun itself killed with SIGKILL: nothing of the job outlives it, not
# even what the ranks started in the background (its guard kills the ranks'
# process groups; PR_SET_PDEATHSIG alone reaches only the ranks).
. "$(dirname "$0")/common.sh"

"$CHORUSRUN" -np 3 bash -c \
  "(exec -a $MARKER sleep 60) & (exec -a $MARKER-too sleep 60) & touch $TMP/ready.\$CHORUS_RANK; wait" \
  2>"$TMP/err" &
job=$!
wait_for_files "$TMP/ready" 3 || fail "ranks did not start: $(cat "$TMP/err")"

n=$(pgrep -fc -- "^$MARKER")  # the sleeps (the shells' command lines start otherwise)
[ "$n" = 6 ] || fail "expected 6 background processes of the ranks, found $n"
kill -9 $job
wait $job 2>/dev/null
expect_no_leftovers
echo PASS
