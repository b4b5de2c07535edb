# chorusrun exits with the status of the first rank that failed, and says which.
. "$(dirname "$0")/common.sh"

"$CHORUSRUN" -np 3 true || fail "all ranks succeeded but chorusrun failed"

"$CHORUSRUN" -np 3 bash -c 'if [ "$CHORUS_RANK" = 1 ]; then sleep 0.2; exit 3; fi; sleep 30' 2>"$TMP/err"
rc=$?
cat "$TMP/err"
[ $rc = 3 ] || fail "exit status $rc, expected 3"
grep -q "rank 1 (pid [0-9]*) exited with status 3" "$TMP/err" || fail "message does not name rank 1"

# Rank 2 fails first; rank 0 would fail later with another status but is stopped.
"$CHORUSRUN" -np 3 bash -c \
  'case $CHORUS_RANK in 2) exit 5;; 0) sleep 3; exit 7;; *) sleep 30;; esac' 2>"$TMP/err"
rc=$?
[ $rc = 5 ] || fail "exit status $rc, expected 5 (first failure)"

"$CHORUSRUN" -np 2 /nonexistent/program 2>"$TMP/err"
rc=$?
[ $rc = 127 ] || fail "missing program gave $rc"
"$CHORUSRUN" -np 2 no-such-program-in-path 2>"$TMP/err"
rc=$?
[ $rc = 127 ] || fail "program not in PATH gave $rc"
grep -q "no-such-program-in-path" "$TMP/err" || fail "error does not name the program"
echo PASS
