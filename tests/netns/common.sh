# Sourced by the multi-host tests: $1 is chorusrun, $2 the C allreduce
# example. Sets up H simulated hosts (SIMHOSTS, tests/netns/simhosts.sh) with
# `netns_setup H RATE`; everything is removed on exit, however the test ends.
set -u
CHORUSRUN=$1
EXAMPLE=$2
. "$(dirname "$0")/simhosts.sh"
TMP=$(mktemp -d)
MARKER="chorus-netns-$(basename "$0" .sh)-$$-$RANDOM"
AGENT='ip netns exec {host}'

cleanup() {
  kill -9 $(jobs -p) 2>/dev/null
  pkill -9 -f "$MARKER"
  simhosts_down
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 143' INT TERM  # the EXIT trap cleans up
unset CHORUS_RANK CHORUS_WORLD_SIZE CHORUS_STORE_ADDR CHORUS_JOB_TOKEN TF_CONFIG

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

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

# Fails when a process with the marker still exists shortly after the job.
expect_no_leftovers() {
  for _ in $(seq 50); do
    pgrep -f "$MARKER" >/dev/null || return 0
    sleep 0.1
  done
  pgrep -af "$MARKER" >&2
  fail "processes with marker $MARKER survived the job"
}
