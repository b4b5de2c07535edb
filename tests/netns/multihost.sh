# chorusrun across simulated hosts (tests/netns/simhosts.sh): chorusrun runs
# on the first host and starts the others' ranks with `ip netns exec {host}`
# as its launch agent. The C example gives correct results on 2 hosts x 2
# ranks (by slot and by node) and on 3 hosts from a hostfile; each rank gets
# its host's local rank and size.
. "$(dirname "$0")/common.sh"

netns_setup 3 1gbit
h0=${SIMHOSTS[0]} h1=${SIMHOSTS[1]} h2=${SIMHOSTS[2]}

# check_example OUT NP: every rank printed its result line with 0 wrong.
check_example() {
  local out=$1 np=$2 r
  for ((r = 0; r < np; r++)); do
    grep -q "^rank $r of $np: allreduce of [0-9]* floats: 0 wrong$" <<<"$out" ||
      fail "rank $r has no correct result in: $out"
  done
}

# The C example, 2 hosts x 2 ranks, mapped by slot.
out=$(on "$h0" "$CHORUSRUN" -H "$h0:2,$h1:2" --launch-agent "$AGENT" "$EXAMPLE" 100003) ||
  fail "2x2 by slot failed: $out"
check_example "$out" 4

# A large allreduce through the hierarchical algorithm: shared memory within
# each host, and the lanes' allreduces across hosts on a thread of their own
# beside it, segment after segment (16 MB: 15 segments).
out=$(on "$h0" "$CHORUSRUN" -H "$h0:2,$h1:2" --launch-agent "$AGENT" \
  -x CHORUS_ALGO=allreduce:0-inf:hierarchical -x CHORUS_LOG_LEVEL=debug "$EXAMPLE" 4000000 2>&1) ||
  fail "2x2 hierarchical failed: $out"
check_example "$out" 4
grep -q "stage: allreduce of 53333[26] bytes on team lane" <<<"$out" ||
  fail "no lane stage of a 16 MB segment in: $(grep stage <<<"$out" | head)"

# Where each rank ran, and its local rank and size there.
placement() {
  on "$h0" "$CHORUSRUN" "$@" --launch-agent "$AGENT" bash -c \
    'echo "$CHORUS_RANK $(ip netns identify $$) $CHORUS_LOCAL_RANK $CHORUS_LOCAL_SIZE $CHORUS_STORE_ADDR"' |
    sort -n | cut -d' ' -f1-4 | tr '\n' ';'
}
got=$(placement -H "$h0:2,$h1:2")
[ "$got" = "0 $h0 0 2;1 $h0 1 2;2 $h1 0 2;3 $h1 1 2;" ] || fail "by slot: $got"
got=$(placement -H "$h0:2,$h1:2" --map-by node)
[ "$got" = "0 $h0 0 2;1 $h1 0 2;2 $h0 1 2;3 $h1 1 2;" ] || fail "by node: $got"
# The store listens on h0's address towards the other hosts.
addr=$(on "$h0" "$CHORUSRUN" -H "$h0:1,$h1:1" --launch-agent "$AGENT" bash -c 'echo $CHORUS_STORE_ADDR' | sort -u)
[[ "$addr" =~ ^10\.250\.0\.1:[0-9]+$ ]] || fail "store address '$addr'"
# --store-addr chooses it; -np below the slot count fills the first host first.
addr=$(on "$h0" "$CHORUSRUN" -H "$h0:1,$h1:1" --store-addr "$SIMHOSTS_SUBNET.1" \
  --launch-agent "$AGENT" bash -c 'echo $CHORUS_STORE_ADDR' | sort -u)
[[ "$addr" =~ ^10\.250\.0\.1:[0-9]+$ ]] || fail "--store-addr gave '$addr'"
got=$(placement -np 3 -H "$h0:2,$h1:2")
[ "$got" = "0 $h0 0 2;1 $h0 1 2;2 $h1 0 1;" ] || fail "-np 3 by slot: $got"

out=$(on "$h0" "$CHORUSRUN" -H "$h0:2,$h1:2" --map-by node --launch-agent "$AGENT" "$EXAMPLE" 100003) ||
  fail "2x2 by node failed: $out"
check_example "$out" 4

# A hostfile with unequal slots on 3 hosts; -x reaches the remote ranks;
# --tag-output tags them with their global rank.
cat >"$TMP/hostfile" <<HOSTS
# three simulated hosts
$h0 slots=1

$h1 slots=2   # two ranks here
$h2
HOSTS
export CHORUS_TEST_FROM_LAUNCHER=here
out=$(on "$h0" "$CHORUSRUN" --hostfile "$TMP/hostfile" --launch-agent "$AGENT" --tag-output \
  -x CHORUS_TEST_FROM_LAUNCHER -x CHORUS_TEST_SET=a=b bash -c \
  'echo "$CHORUS_RANK $(ip netns identify $$) $CHORUS_TEST_FROM_LAUNCHER $CHORUS_TEST_SET"') ||
  fail "hostfile job failed: $out"
for line in "[1,0]<stdout>:0 $h0 here a=b" "[1,1]<stdout>:1 $h1 here a=b" \
  "[1,2]<stdout>:2 $h1 here a=b" "[1,3]<stdout>:3 $h2 here a=b"; do
  grep -qxF "$line" <<<"$out" || fail "hostfile job: no line '$line' in: $out"
done
out=$(on "$h0" "$CHORUSRUN" --hostfile "$TMP/hostfile" --launch-agent "$AGENT" "$EXAMPLE" 100003) ||
  fail "hostfile example failed: $out"
check_example "$out" 4

# chorusrun need not run on one of the hosts; rank output keeps its lines.
out=$(on "$h2" "$CHORUSRUN" -H "$h0:1,$h1:1" --launch-agent "$AGENT" "$EXAMPLE" 1000) ||
  fail "job launched from outside its hosts failed: $out"
check_example "$out" 2
echo PASS
