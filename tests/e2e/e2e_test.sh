#!/usr/bin/env bash
# End-to-end checks through chorusrun. Usage: e2e_test.sh CASE CHORUSRUN E2E_RANK [EXAMPLE]
# Every case bounds its own time and leaves no process behind.
set -uo pipefail
case_name=$1 chorusrun=$2 e2e=$3 example=${4:-} example_cpp=${5:-}
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
fail() { echo "FAIL ($case_name): $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; tail -n 40 "$err"; exit 1; }

start=$(date +%s.%N)
case $case_name in
  example)
    timeout 120 "$chorusrun" -np 4 --tag-output "$example" 4194307 >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    [ "$(grep -c ': 0 wrong' "$out")" -eq 4 ] || fail "not every rank reported 0 wrong"
    ;;
  example-cpp)
    timeout 120 "$chorusrun" -np 3 "$example_cpp" >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    [ "$(grep -c 'C++ API: 0 wrong' "$out")" -eq 3 ] || fail "not every rank reported 0 wrong"
    ;;
  kill | kill-tcp | kill-shm)
    # kill: the default choice (shared memory on one host); kill-tcp / kill-shm
    # force the transport. No segment may be left in /dev/shm.
    np=4 victim=2
    transport=auto
    [ "$case_name" = kill-tcp ] && transport=tcp
    [ "$case_name" = kill-shm ] && transport=shm
    shm_before=$(ls /dev/shm | grep '^chorus-' | sort)
    CHORUS_TRANSPORT=$transport timeout 60 "$chorusrun" -np $np "$e2e" kill $victim >"$out" 2>"$err"
    rc=$?
    elapsed=$(echo "$(date +%s.%N) - $start" | bc)
    [ $rc -ne 0 ] || fail "chorusrun exited 0 although rank $victim was killed"
    [ $rc -ne 124 ] || fail "timed out"
    for r in 0 1 3; do
      grep -q "^rank $r: allreduce failed: code 4 .*rank $victim" "$out" ||
        fail "rank $r did not report a peer failure naming rank $victim"
    done
    # Bound generous to CPU noise; the design target is a few seconds.
    awk -v e="$elapsed" 'BEGIN { exit !(e < 10) }' || fail "took ${elapsed}s (limit 10s)"
    shm_after=$(ls /dev/shm | grep '^chorus-' | sort)
    new_segments=$(comm -13 <(echo "$shm_before") <(echo "$shm_after"))
    [ -z "$new_segments" ] || fail "segments left in /dev/shm: $new_segments"
    echo "killed rank $victim ($transport): job ended in ${elapsed}s with status $rc, /dev/shm clean"
    ;;
  shm-leftover)
    # A rank killed while it held a segment's name (set-up): chorusrun removes
    # the job's segments when the job ends, and only the job's.
    other=/dev/shm/chorus-otherjob-e2e$$
    touch "$other"
    timeout 60 "$chorusrun" -np 2 bash -c \
      'p=/dev/shm/chorus-${CHORUS_JOB_TOKEN}-e2e; touch $p$CHORUS_RANK
       for i in $(seq 100); do [ -e ${p}0 ] && [ -e ${p}1 ] && break; sleep 0.05; done
       [ $CHORUS_RANK = 0 ] && kill -9 $$; sleep 30' >"$out" 2>"$err"
    rc=$?
    [ -e "$other" ] || fail "chorusrun removed another job's segment"
    rm -f "$other"
    [ $rc -ne 0 ] || fail "chorusrun exited 0"
    left=$(ls /dev/shm | grep -E '^chorus-[0-9a-f]+-e2e[01]$')
    [ -z "$left" ] || fail "segments left: $left"
    [ "$(grep -c 'removed shared-memory segment' "$err")" -eq 2 ] || fail "the removals were not reported"
    ;;
  concurrent-shm)
    # Two jobs at once on one host: each uses its own segment (named from its
    # job token) and both compute correct results.
    out2=$(mktemp) err2=$(mktemp)
    CHORUS_LOG_LEVEL=debug timeout 120 "$chorusrun" -np 3 --tag-output "$example" 1048573 >"$out" 2>"$err" &
    job1=$!
    CHORUS_LOG_LEVEL=debug timeout 120 "$chorusrun" -np 3 --tag-output "$example" 1048573 >"$out2" 2>"$err2" &
    job2=$!
    wait $job1; rc1=$?
    wait $job2; rc2=$?
    seg1=$(grep -o 'joined shared-memory segment chorus-[^ ]*' "$err" | sort -u)
    seg2=$(grep -o 'joined shared-memory segment chorus-[^ ]*' "$err2" | sort -u)
    cat "$out2" >>"$out"; cat "$err2" >>"$err"
    rm -f "$out2" "$err2"
    [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] || fail "exit statuses $rc1 $rc2"
    [ "$(grep -c ': 0 wrong' "$out")" -eq 6 ] || fail "not every rank of both jobs reported 0 wrong"
    [ "$(echo "$seg1" | wc -l)" -eq 1 ] && [ -n "$seg1" ] || fail "job 1 ranks saw segments: $seg1"
    [ "$(echo "$seg2" | wc -l)" -eq 1 ] && [ -n "$seg2" ] || fail "job 2 ranks saw segments: $seg2"
    [ "$seg1" != "$seg2" ] || fail "both jobs used $seg1"
    echo "job 1: ${seg1##* }; job 2: ${seg2##* }"
    ;;
  hosts)
    # Four simulated hosts (a host identity per rank): no shared memory; the
    # point-to-point algorithms carry the allreduce, over UCX where built.
    CHORUS_LOG_LEVEL=info timeout 120 "$chorusrun" -np 4 --tag-output bash -c \
      'CHORUS_HOST_ID=host$((CHORUS_RANK / 2)) exec "$0" 1048573' "$example" >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    [ "$(grep -c ': 0 wrong' "$out")" -eq 4 ] || fail "not every rank reported 0 wrong"
    [ "$(grep -cE '2 of them on this host, on [0-9]+ CPUs; collectives through point-to-point algorithms' "$err")" -eq 4 ] ||
      fail "ranks on two hosts did not all leave shared memory out"
    ;;
  bound)
    # Ranks bound one per CPU fit the host: the CPUs counted are the union of
    # their affinities, not each one's single CPU (which made every bound rank
    # think it outnumbered the cores and yield at every spin).
    cpus=$(( $(nproc) < 2 ? $(nproc) : 2 ))
    CHORUS_LOG_LEVEL=info timeout 120 "$chorusrun" -np 2 --bind-to core --tag-output "$example" 100003 \
      >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    [ "$(grep -c ': 0 wrong' "$out")" -eq 2 ] || fail "not every rank reported 0 wrong"
    [ "$(grep -c "2 of them on this host, on $cpus CPUs" "$err")" -eq 2 ] ||
      fail "bound ranks did not count the $cpus CPUs they share"
    ;;
  mismatch)
    timeout 60 "$chorusrun" -np 3 "$e2e" mismatch 1 >"$out" 2>"$err"
    rc=$?
    [ $rc -ne 0 ] || fail "chorusrun exited 0"
    grep -Eq "code 5 .*rank 1 called allreduce #1 \(count 1001.*but rank [02] called allreduce #1 \(count 1000" "$out" ||
      grep -Eq "code 5 .*rank [02] called allreduce #1 \(count 1000.*but rank 1 called allreduce #1 \(count 1001" "$out" ||
      fail "no mismatch error naming both ranks and both calls"
    ;;
  stranger)
    timeout 60 "$chorusrun" -np 3 "$e2e" stranger >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    grep -q "was closed (refused)" "$out" || fail "the stranger was not refused"
    grep -q "refused connection from .*wrong job token" "$err" || fail "the refusal was not logged"
    [ "$(grep -c 'job completed' "$out")" -eq 3 ] || fail "the job did not complete on every rank"
    ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
# Nothing of the job may survive it.
sleep 0.2
left=$(pgrep -x "$(basename "$e2e")"; [ -n "$example" ] && pgrep -x "$(basename "$example")"
  [ -n "$example_cpp" ] && pgrep -x "$(basename "$example_cpp")")
[ -z "$left" ] || fail "processes left behind: $left"
echo "PASS ($case_name)"
