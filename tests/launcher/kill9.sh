# A rank that dies by SIGKILL stops the job quickly and nothing stays behind,
# not even what the ranks started.
. "$(dirname "$0")/common.sh"

start=$SECONDS
timeout 30 "$CHORUSRUN" -np 3 bash -c \
  "(exec -a $MARKER sleep 60) & if [ \$CHORUS_RANK = 2 ]; then sleep 0.5; kill -9 \$\$; fi; wait" \
  2>"$TMP/err"
rc=$?
elapsed=$((SECONDS - start))
cat "$TMP/err"
[ $rc = 124 ] && fail "chorusrun hung"
[ $rc = 137 ] || fail "exit status $rc, expected 137 (128 + SIGKILL)"
[ $elapsed -lt 10 ] || fail "took $elapsed s to stop"
grep -q "rank 2 (pid [0-9]*) killed by signal 9" "$TMP/err" || fail "message does not name rank 2"
expect_no_leftovers
echo PASS
