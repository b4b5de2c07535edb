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

# Descendants that left the rank's process group (setsid) go at the end too.
"$CHORUSRUN" -np 2 bash -c "setsid bash -c 'exec -a $MARKER-daemon sleep 60' </dev/null & sleep 0.3" ||
  fail "job with daemons failed"
expect_no_leftovers
echo PASS
