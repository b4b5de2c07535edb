# Sourced by the launcher tests: $1 is chorusrun, $2 the store_rank helper.
set -u
CHORUSRUN=$1
HELPER=$2
TMP=$(mktemp -d)
# A test that fails with a job still running takes the job down with it (or
# meson would wait for the job's open stdout until its own timeout).
# The pattern is never empty: pkill -f "" would match every process here.
trap 'kill -9 $(jobs -p) 2>/dev/null; [ -n "${MARKER:-}" ] && pkill -9 -f "$MARKER"; rm -rf "$TMP"' EXIT
unset CHORUS_RANK CHORUS_WORLD_SIZE CHORUS_STORE_ADDR CHORUS_JOB_TOKEN TF_CONFIG

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# A string no other process has in its command line.
MARKER="chorus-test-$(basename "$0" .sh)-$$-$RANDOM"

# Fails when a process with the marker still exists shortly after the job
# (the marker is unique to this test run: nothing else on the host has it).
expect_no_leftovers() {
  for _ in $(seq 50); do
    pgrep -f "$MARKER" >/dev/null || return 0
    sleep 0.1
  done
  pgrep -af "$MARKER" >&2
  fail "processes with marker $MARKER survived the job"
}

# wait_for_files PREFIX N: returns 0 once N files PREFIX.* exist (within 20 s).
wait_for_files() {
  local i n
  for i in $(seq 400); do
    n=$(find "$(dirname "$1")" -maxdepth 1 -name "$(basename "$1").*" | wc -l)
    [ "$n" -ge "$2" ] && return 0
    sleep 0.05
  done
  return 1
}
