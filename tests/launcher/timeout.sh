# --timeout stops the job and exits with 124.
. "$(dirname "$0")/common.sh"

"$CHORUSRUN" --timeout 1 -np 2 bash -c "exec -a $MARKER sleep 60" 2>"$TMP/err"
rc=$?
cat "$TMP/err"
[ $rc = 124 ] || fail "exit status $rc, expected 124"
grep -q "timeout" "$TMP/err" || fail "no timeout message"
expect_no_leftovers

"$CHORUSRUN" --timeout 500ms -np 1 sleep 60 2>/dev/null
[ $? = 124 ] || fail "--timeout 500ms"
"$CHORUSRUN" --timeout 30 -np 2 true || fail "a job within its timeout failed"
"$CHORUSRUN" --timeout bogus -np 1 true 2>/dev/null && fail "--timeout bogus accepted"
echo PASS
