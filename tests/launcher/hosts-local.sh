# -H and --hostfile naming only this machine run every rank here, as -np
# does; mistakes in the host list are usage errors (status 2) that say what
# is wrong.
. "$(dirname "$0")/common.sh"

show='echo "$CHORUS_RANK $CHORUS_WORLD_SIZE $CHORUS_LOCAL_RANK $CHORUS_LOCAL_SIZE $CHORUS_STORE_ADDR"'
out=$("$CHORUSRUN" -H "localhost:2,$(hostname):1" bash -c "$show" | sort -n) || fail "-H local failed"
echo "$out"
[ "$(echo "$out" | cut -d' ' -f1-4 | tr '\n' ';')" = "0 3 0 3;1 3 1 3;2 3 2 3;" ] ||
  fail "-H localhost:2,$(hostname):1 placed: $out"
[ "$(echo "$out" | cut -d' ' -f5 | grep -cv '^127\.0\.0\.1:')" = 0 ] || fail "store not on 127.0.0.1"

printf '# only here\nlocalhost slots=2\n' >"$TMP/hostfile"
out=$("$CHORUSRUN" --hostfile "$TMP/hostfile" -np 1 bash -c "$show") || fail "--hostfile failed"
[ "$(echo "$out" | cut -d' ' -f1-4)" = "0 1 0 1" ] || fail "--hostfile -np 1 gave: $out"

expect_usage_error() {
  local expected=$1
  shift
  "$CHORUSRUN" "$@" true 2>"$TMP/err"
  local rc=$?
  [ $rc = 2 ] || fail "chorusrun $* gave status $rc, expected 2: $(cat "$TMP/err")"
  grep -q -- "$expected" "$TMP/err" || fail "chorusrun $*: no '$expected' in: $(cat "$TMP/err")"
}
expect_usage_error "do not fit" -np 3 -H localhost:2
expect_usage_error "not both" -H localhost --hostfile "$TMP/hostfile"
expect_usage_error "slots" -H localhost:x
expect_usage_error "cannot read" --hostfile "$TMP/missing"
expect_usage_error "give the number of ranks" bash
echo PASS
