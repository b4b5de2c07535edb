# Every rank gets its own CHORUS_RANK and the job's shared variables.
. "$(dirname "$0")/common.sh"

out=$(CHORUS_RANK=99 "$CHORUSRUN" -np 4 bash -c \
  'echo "$CHORUS_RANK $CHORUS_WORLD_SIZE $CHORUS_LOCAL_RANK $CHORUS_LOCAL_SIZE $CHORUS_STORE_ADDR $CHORUS_JOB_TOKEN"') ||
  fail "chorusrun failed"
echo "$out"
[ "$(echo "$out" | wc -l)" = 4 ] || fail "expected 4 lines"
[ "$(echo "$out" | cut -d' ' -f1 | sort -n | tr '\n' ' ')" = "0 1 2 3 " ] || fail "ranks not 0..3"
echo "$out" | while read -r rank size lrank lsize addr token; do
  [ "$size" = 4 ] || fail "world size $size"
  [ "$lrank" = "$rank" ] || fail "local rank $lrank for rank $rank"
  [ "$lsize" = 4 ] || fail "local size $lsize"
  [[ "$addr" =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "store address '$addr'"
  [[ "$token" =~ ^[0-9a-f]{32}$ ]] || fail "token '$token'"
done || exit 1
[ "$(echo "$out" | cut -d' ' -f5,6 | sort -u | wc -l)" = 1 ] || fail "ranks disagree on store/token"

# -x: set a value, or pass one from here.
export CHORUS_TEST_PASSED=from-here
out=$("$CHORUSRUN" -np 2 -x CHORUS_TEST_SET=a=b -x CHORUS_TEST_PASSED bash -c \
  'echo "$CHORUS_TEST_SET $CHORUS_TEST_PASSED"') || fail "chorusrun -x failed"
[ "$(echo "$out" | sort -u)" = "a=b from-here" ] || fail "-x gave '$out'"

# The ranks meet at chorusrun's store.
out=$("$CHORUSRUN" -np 4 "$HELPER") || fail "store rendezvous failed: $out"
[ "$(echo "$out" | grep -c ' ok$')" = 4 ] || fail "not every rank reported ok: $out"
echo PASS
