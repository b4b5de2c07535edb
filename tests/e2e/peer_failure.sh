# Sourced by tests that run e2e_rank's kill mode (tests/e2e/e2e_test.sh,
# tests/netns/peer-failure.sh); the caller defines fail.
#
# expect_peer_failure_reports OUT VICTIM SURVIVOR...: in the job's stdout OUT,
# the victim killed itself (killed_at is set to its clock reading then) and
# each survivor's allreduce failed with a peer failure (code 4) naming it
# within 10 s of that, measured on the ranks' own clocks.
expect_peer_failure_reports() {
  local output=$1 victim=$2 r seen lag
  shift 2
  killed_at=$(grep -o "^rank $victim: killing myself at [0-9]*" "$output" | awk '{print $NF}')
  [ -n "$killed_at" ] || fail "the victim did not kill itself"
  for r in "$@"; do
    grep -q "^rank $r: allreduce failed: code 4 .*rank $victim" "$output" ||
      fail "rank $r did not report a peer failure naming rank $victim"
    seen=$(grep -o "^rank $r: failed at [0-9]*" "$output" | awk '{print $NF}')
    lag=$(((seen - killed_at) / 1000000))
    [ $lag -lt 10000 ] || fail "rank $r saw the failure ${lag} ms after the kill (limit 10 s)"
    echo "rank $r failed ${lag} ms after rank $victim was killed"
  done
}
