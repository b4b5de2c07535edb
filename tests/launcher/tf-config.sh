# --tf-config gives every rank a TF_CONFIG that alone yields its rank, with a
# distinct address per task; --ps K adds a chief and K ps tasks, and lets a
# worker (but not the chief or a server) fail without stopping the job.
. "$(dirname "$0")/common.sh"

out=$("$CHORUSRUN" -np 3 --tf-config "$HELPER" --tf) || fail "TF_CONFIG ranks failed: $out"
echo "$out"
[ "$(echo "$out" | grep -c 'of 3')" = 3 ] || fail "not every rank saw 3 workers"
out=$("$CHORUSRUN" -np 1 bash -c 'echo "${TF_CONFIG-unset}"')
[ "$out" = unset ] || fail "TF_CONFIG set without --tf-config"

# One TF_CONFIG per rank: its task, and a cluster whose addresses differ.
"$CHORUSRUN" -np 5 --ps 2 bash -c 'echo "$TF_CONFIG" > '"$TMP"'/tf.$CHORUS_RANK' ||
  fail "--ps job failed"
python3 - "$TMP" <<'PY' || fail "wrong TF_CONFIG with --ps"
import json, sys
tasks = []
for r in range(5):
    tf = json.load(open(f"{sys.argv[1]}/tf.{r}"))
    cluster = tf["cluster"]
    addrs = cluster["chief"] + cluster["worker"] + cluster["ps"]
    assert len(set(addrs)) == 5 and all(a.startswith("127.0.0.1:") for a in addrs), addrs
    tasks.append((tf["task"]["type"], tf["task"]["index"]))
assert tasks == [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0), ("ps", 1)], tasks
PY
out=$("$CHORUSRUN" -np 4 --ps 1 "$HELPER" --tf) || fail "--ps TF_CONFIG ranks failed: $out"
[ "$(echo "$out" | grep -c 'of 4')" = 4 ] || fail "not every rank saw 4 tasks: $out"

# A worker killed by a signal: the others finish, the job exits 0 and says so.
err=$("$CHORUSRUN" -np 4 --ps 1 bash -c \
  '[ "$CHORUS_RANK" = 2 ] && kill -9 $$; sleep 1; echo "done $CHORUS_RANK"' 2>&1 >"$TMP/out")
rc=$?
echo "$err"
[ $rc = 0 ] || fail "a failed worker under --ps ended the job with $rc"
[ "$(grep -c done "$TMP/out")" = 3 ] || fail "the other ranks did not finish: $(cat "$TMP/out")"
echo "$err" | grep -q "rank 2 (worker 1, pid [0-9]*) killed by signal 9" ||
  fail "the failed worker was not named"
# The chief or a server failing stops the job with its status.
for bad in 0 3; do
  "$CHORUSRUN" -np 4 --ps 1 -x BAD=$bad bash -c \
    '[ "$CHORUS_RANK" = "$BAD" ] && exit 7; sleep 30' 2>/dev/null
  rc=$?
  [ $rc = 7 ] || fail "rank $bad failing under --ps gave $rc, not 7"
done
"$CHORUSRUN" -np 2 --ps 2 true 2>"$TMP/err" && fail "--ps 2 with -np 2 accepted"
grep -q "needs a chief" "$TMP/err" || fail "no reason for refusing --ps 2: $(cat "$TMP/err")"
echo PASS
