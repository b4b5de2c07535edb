# --tag-output prefixes every line like Open MPI, partial last lines included.
. "$(dirname "$0")/common.sh"

"$CHORUSRUN" -np 2 --tag-output bash -c \
  'echo "line one $CHORUS_RANK"; echo "to stderr $CHORUS_RANK" >&2; printf "no newline $CHORUS_RANK"' \
  >"$TMP/out" 2>"$TMP/err" || fail "chorusrun failed"
cat "$TMP/out" "$TMP/err"
for r in 0 1; do
  grep -qxF "[1,$r]<stdout>:line one $r" "$TMP/out" || fail "stdout line of rank $r"
  grep -qxF "[1,$r]<stdout>:no newline $r" "$TMP/out" || fail "partial line of rank $r"
  grep -qxF "[1,$r]<stderr>:to stderr $r" "$TMP/err" || fail "stderr line of rank $r"
done
[ "$(wc -l <"$TMP/out")" = 4 ] || fail "unexpected stdout lines"

# Many lines from many ranks: none torn or lost.
"$CHORUSRUN" -np 4 --tag-output bash -c 'for i in $(seq 500); do echo "r$CHORUS_RANK-$i-abcdefghijklmnopqrstuvwxyz"; done' \
  >"$TMP/many" || fail "chorusrun failed"
[ "$(grep -cE '^\[1,[0-3]\]<stdout>:r[0-3]-[0-9]+-abcdefghijklmnopqrstuvwxyz$' "$TMP/many")" = 2000 ] ||
  fail "lines torn or lost"

# Without the flag, output is passed through untouched.
out=$("$CHORUSRUN" -np 1 echo plain) || fail "chorusrun failed"
[ "$out" = plain ] || fail "untagged output '$out'"
echo PASS
