# --tf-config gives every rank a TF_CONFIG that alone yields its rank.
. "$(dirname "$0")/common.sh"

out=$("$CHORUSRUN" -np 3 --tf-config "$HELPER" --tf) || fail "TF_CONFIG ranks failed: $out"
echo "$out"
[ "$(echo "$out" | grep -c 'of 3')" = 3 ] || fail "not every rank saw 3 workers"
out=$("$CHORUSRUN" -np 1 bash -c 'echo "${TF_CONFIG-unset}"')
[ "$out" = unset ] || fail "TF_CONFIG set without --tf-config"
echo PASS
