# Sourced by the multi-host tests: $1 is chorusrun, $2 the C allreduce
# example. The launcher tests' helpers (fail, MARKER, TMP,
# expect_no_leftovers), plus `netns_setup H RATE`, which sets up H simulated
# hosts (SIMHOSTS, tests/netns/simhosts.sh); everything is removed on exit,
# however the test ends.
. "$(dirname "$0")/../launcher/common.sh" || { echo "tests/launcher/common.sh not found" >&2; exit 1; }
EXAMPLE=$2
. "$(dirname "$0")/simhosts.sh" || { echo "tests/netns/simhosts.sh not found" >&2; exit 1; }
AGENT='ip netns exec {host}'

cleanup() {
  kill -9 $(jobs -p) 2>/dev/null
  [ -n "${MARKER:-}" ] && pkill -9 -f "$MARKER"  # never pkill -f "": it matches everything
  simhosts_down
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 143' INT TERM  # the EXIT trap cleans up

netns_setup() {
  simhosts_up "$1" "$2"
  local rc=$?
  if [ $rc = 77 ]; then
    echo "SKIP: network namespaces cannot be created here"
    exit 77
  fi
  [ $rc = 0 ] || fail "simulated hosts could not be set up"
}

# on HOST COMMAND...: runs a command on a simulated host, bounded in time.
on() {
  local host=$1
  shift
  timeout -k 5 60 ip netns exec "$host" "$@"
}
