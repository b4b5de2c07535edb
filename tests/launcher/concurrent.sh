# Two jobs at once: each has its own store port and token, both succeed.
. "$(dirname "$0")/common.sh"

"$CHORUSRUN" -np 3 "$HELPER" --hold=500 >"$TMP/a" 2>&1 &
a=$!
"$CHORUSRUN" -np 3 "$HELPER" --hold=500 >"$TMP/b" 2>&1 &
b=$!
wait $a || fail "job A failed: $(cat "$TMP/a")"
wait $b || fail "job B failed: $(cat "$TMP/b")"
cat "$TMP/a" "$TMP/b"
[ "$(grep -c ' ok$' "$TMP/a")" = 3 ] || fail "job A incomplete"
[ "$(grep -c ' ok$' "$TMP/b")" = 3 ] || fail "job B incomplete"
addr_a=$(awk '{print $4}' "$TMP/a" | sort -u)
addr_b=$(awk '{print $4}' "$TMP/b" | sort -u)
[ "$addr_a" != "$addr_b" ] || fail "both jobs used store $addr_a"
echo PASS
