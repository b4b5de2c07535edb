# chorusrun across simulated hosts when things go wrong: a rank killed on the
# second host stops every rank on every host within seconds, naming it; so do
# --timeout, Ctrl-C and chorusrun's own death (the remote agent sees its
# stdin close); a launch agent that fails is named with its host. Nothing
# is left behind, processes or namespaces.
. "$(dirname "$0")/common.sh"

netns_setup 2 10gbit
h0=${SIMHOSTS[0]} h1=${SIMHOSTS[1]}

# expect_rank3_killed RC START: the job that began at START ended with
# 128 + SIGKILL within 10 s, naming rank 3 on h1, and left nothing.
expect_rank3_killed() {
  local rc=$1 elapsed=$((SECONDS - $2))
  cat "$TMP/err"
  [ "$rc" = 137 ] || fail "exit status $rc, expected 137 (128 + SIGKILL)"
  [ $elapsed -lt 10 ] || fail "took $elapsed s to stop"
  grep -q "rank 3 (pid [0-9]* on $h1) killed by signal 9" "$TMP/err" ||
    fail "the message does not name rank 3 on $h1"
  expect_no_leftovers
}

# expect_launch_failure HOSTS AGENT NAMED: the job fails within seconds and
# its error names host NAMED; the ranks started elsewhere stop.
expect_launch_failure() {
  local start=$SECONDS
  on "$h0" "$CHORUSRUN" -H "$1" --launch-agent "$2" bash -c "exec -a $MARKER sleep 60" 2>"$TMP/err" &&
    fail "a failing launch agent gave exit status 0"
  cat "$TMP/err"
  grep -q "host $3 (rank [0-9]*): its launch agent failed" "$TMP/err" || fail "host $3 not named"
  [ $((SECONDS - start)) -lt 10 ] || fail "the launch failure took $((SECONDS - start)) s to report"
  expect_no_leftovers
}

# Ranks that sleep with the marker in their command line; rank 3 (on h1)
# kills itself with SIGKILL once every rank is up.
start=$SECONDS
on "$h0" "$CHORUSRUN" -H "$h0:2,$h1:2" --launch-agent "$AGENT" bash -c \
  "touch $TMP/up.\$CHORUS_RANK; (exec -a $MARKER sleep 60) &
   if [ \$CHORUS_RANK = 3 ]; then
     while [ \$(ls $TMP | grep -c '^up') -lt 4 ]; do sleep 0.1; done; kill -9 \$\$
   fi; wait" 2>"$TMP/err"
expect_rank3_killed $? $start

# Real Chorus ranks (the C example): rank 3 on h1 dies by SIGKILL before it
# joins; the ranks waiting for it are stopped and chorusrun names it.
start=$SECONDS
on "$h0" "$CHORUSRUN" -H "$h0:2,$h1:2" --launch-agent "$AGENT" bash -c \
  "[ \$CHORUS_RANK = 3 ] && kill -9 \$\$; exec -a $MARKER $EXAMPLE 1000" >/dev/null 2>"$TMP/err"
expect_rank3_killed $? $start

# --timeout stops the ranks on both hosts.
on "$h0" "$CHORUSRUN" --timeout 1 -H "$h0:1,$h1:1" --launch-agent "$AGENT" \
  bash -c "exec -a $MARKER sleep 60" 2>"$TMP/err"
rc=$?
[ $rc = 124 ] || fail "--timeout: exit status $rc, expected 124: $(cat "$TMP/err")"
expect_no_leftovers

# Ctrl-C (SIGINT to chorusrun) stops the ranks on both hosts.
on "$h0" "$CHORUSRUN" -x "MARK=$MARKER-int" -H "$h0:1,$h1:2" --launch-agent "$AGENT" \
  bash -c "touch $TMP/int.\$CHORUS_RANK; exec -a $MARKER sleep 60" 2>"$TMP/err" &
job=$!
wait_for_files "$TMP/int" 3 || fail "the ranks did not start: $(cat "$TMP/err")"
pkill -INT -f "^$CHORUSRUN -x MARK=$MARKER-int" || fail "no chorusrun to interrupt"
wait $job
rc=$?
[ $rc = 130 ] || fail "Ctrl-C: exit status $rc, expected 130: $(cat "$TMP/err")"
expect_no_leftovers

# chorusrun killed by SIGKILL: the agent on h1 sees its stdin close and
# stops its ranks (no orphans).
on "$h0" "$CHORUSRUN" -x "MARK=$MARKER-kill" -H "$h0:1,$h1:2" --launch-agent "$AGENT" \
  bash -c "touch $TMP/kill.\$CHORUS_RANK; exec -a $MARKER sleep 60" 2>"$TMP/err" &
wait_for_files "$TMP/kill" 3 || fail "the ranks did not start: $(cat "$TMP/err")"
pkill -KILL -f "^$CHORUSRUN -x MARK=$MARKER-kill" || fail "no chorusrun to kill"
expect_no_leftovers

# The agent alone, as ssh would leave it when the launching machine goes:
# its stdin ends, and it stops its ranks and reports them.
job='{"np":2,"ranks":[0,1],"tag_output":false,"grace_s":2.0,"bind_to":"none","exports":[],'
job+="\"command\":[\"bash\",\"-c\",\"exec -a $MARKER sleep 60\"],\"store_addr\":\"127.0.0.1:1\","
job+='"token":"00","host_name":"'$h1'"}'
start=$SECONDS
(echo "$job"; sleep 1) | on "$h1" "$CHORUSRUN" --host-agent >"$TMP/agent" 2>&1
elapsed=$((SECONDS - start))
cat -v "$TMP/agent"
[ "$(grep -c "chorus-agent:exit [01] 143 (pid [0-9]* on $h1) killed by signal 15" "$TMP/agent")" = 2 ] ||
  fail "the agent did not report both ranks stopped"
[ $elapsed -lt 5 ] || fail "the agent took $elapsed s to stop after its stdin closed"
expect_no_leftovers

# A launch agent that fails, or a host that does not exist, is named
# within seconds, and the ranks already started elsewhere stop.
expect_launch_failure "$h0:1,$h1:1" "false {host}" "$h1"
nope=chs$$nohost
expect_launch_failure "$h0:1,$h1:1,$nope:1" "$AGENT" "$nope"

# A launch agent that never answers (a host that does not reply) is given
# up after CHORUS_CONNECT_TIMEOUT, named, and killed.
start=$SECONDS
CHORUS_CONNECT_TIMEOUT=1 on "$h0" "$CHORUSRUN" -H "$h0:1,$h1:1" \
  --launch-agent "bash -c 'exec -a $MARKER sleep 30' # {host}" bash -c "exec -a $MARKER sleep 60" 2>"$TMP/err" &&
  fail "a silent launch agent gave exit status 0"
cat "$TMP/err"
grep -q "host $h1 (rank 1): no answer from its launch agent within 1 s" "$TMP/err" ||
  fail "the silent agent's host is not named"
[ $((SECONDS - start)) -lt 10 ] || fail "a silent agent took $((SECONDS - start)) s to report"
expect_no_leftovers

# The store's address cannot be chosen when the first other host does not
# resolve: the error names it and suggests --store-addr.
on "$h0" "$CHORUSRUN" -H "$h0:1,$nope:1" --launch-agent "$AGENT" true 2>"$TMP/err" &&
  fail "an unresolvable host was accepted"
grep -q "$nope.*--store-addr" "$TMP/err" || fail "no store address error: $(cat "$TMP/err")"

# Teardown leaves no namespace and no hosts file.
simhosts_down
ip netns list | grep -q "^chs$$" && fail "namespaces left: $(ip netns list)"
ls /etc/netns 2>/dev/null | grep -q "^chs$$" && fail "hosts files left"
echo PASS
