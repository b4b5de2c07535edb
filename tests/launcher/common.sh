# Sourced by the launcher tests: $1 is chorusrun, $2 the store_rank helper.
set -u
CHORUSRUN=$1
HELPER=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unset CHORUS_RANK CHORUS_WORLD_SIZE CHORUS_STORE_ADDR CHORUS_JOB_TOKEN TF_CONFIG

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# A string no other process has in its command line.
MARKER="chorus-test-$(basename "$0" .sh)-$$-$RANDOM"

# Fails when a process with the marker still exists shortly after the job.
expect_no_leftovers() {
  for _ in $(seq 20); do
    pgrep -f "$MARKER" >/dev/null || return 0
    sleep 0.1
  done
  pgrep -af "$MARKER" >&2
  fail "processes with marker $MARKER survived the job"
}
