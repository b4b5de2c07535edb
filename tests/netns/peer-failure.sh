# A rank killed by SIGKILL on the second simulated host, in the middle of
# allreduces over TCP between hosts: every survivor, on both hosts, fails with
# a peer failure naming it within 10 s of its death (tests/e2e/e2e_rank kill
# mode, which ignores SIGTERM so that chorusrun's stop does not race the
# reports); chorusrun exits non-zero naming it too, and nothing is left.
# $3 is tests/e2e's e2e_rank.
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/../e2e/peer_failure.sh"
E2E_RANK=$3

netns_setup 2 10gbit
h0=${SIMHOSTS[0]} h1=${SIMHOSTS[1]}
victim=3  # the second rank of h1

on "$h0" "$CHORUSRUN" -x "MARK=$MARKER" -H "$h0:2,$h1:2" --launch-agent "$AGENT" \
  "$E2E_RANK" kill $victim >"$TMP/out" 2>"$TMP/err"
rc=$?
cat "$TMP/out" "$TMP/err"
[ $rc != 0 ] && [ $rc != 124 ] || fail "exit status $rc, expected a failure"
# chorusrun names the first rank it hears of: the victim, or a survivor that
# already reported its failure and exited 3 (as tests/e2e accepts).
grep -q "rank $victim (pid [0-9]* on $h1) killed by signal 9" "$TMP/err" ||
  grep -q "rank [0-9] (pid [0-9]* on chs[0-9]*h[01]) exited with status 3" "$TMP/err" ||
  fail "chorusrun named no failing rank"
expect_peer_failure_reports "$TMP/out" $victim 0 1 2
expect_no_leftovers
echo PASS
