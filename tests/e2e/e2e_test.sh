#!/usr/bin/env bash
# End-to-end checks through chorusrun. Usage: e2e_test.sh CASE CHORUSRUN E2E_RANK [EXAMPLE [EXAMPLE_CPP]]
# Every case bounds its own time and leaves no process behind. What belongs
# to a job is found by what only that job has: its processes by a marker in
# their environment (E2E_MARKER, given to chorusrun alone), its shared-memory
# segments by its job token (chorus-<token>-...). Nothing machine-wide.
set -uo pipefail
case_name=$1 chorusrun=$2 e2e=$3 example=${4:-} example_cpp=${5:-}
out=$(mktemp) err=$(mktemp)
marker="e2e-$case_name-$$-$RANDOM"
trap 'kill_marked; rm -f "$out" "$err"' EXIT
fail() { echo "FAIL ($case_name): $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; tail -n 40 "$err"; exit 1; }

# The pids of processes whose environment holds this test's marker.
marked() {
  local f
  for f in /proc/[0-9]*/environ; do
    { tr '\0' '\n' <"$f"; } 2>/dev/null | grep -qx "E2E_MARKER=$marker" && basename "$(dirname "$f")"
  done
  return 0
}
kill_marked() { local p; for p in $(marked); do kill -9 "$p" 2>/dev/null; done; }
# run ARGS...: chorusrun with the marker in the job's environment.
run() { env E2E_MARKER="$marker" timeout 120 "$chorusrun" "$@"; }
job_token() { grep -om1 'token [0-9a-f]*' "$out" | cut -d' ' -f2; }
segments_of() { ls /dev/shm | grep "^chorus-$1-" || true; }
# exit_status_in RC STATUS...: whether RC is one of the statuses.
exit_status_in() { local rc=$1 s; shift; for s; do [ "$rc" = "$s" ] && return 0; done; return 1; }
. "$(dirname "$0")/peer_failure.sh"

case $case_name in
  example)
    run -np 4 --tag-output "$example" 4194307 >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    [ "$(grep -c ': 0 wrong' "$out")" -eq 4 ] || fail "not every rank reported 0 wrong"
    ;;
  example-cpp)
    run -np 3 "$example_cpp" >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    [ "$(grep -c 'C++ API: 0 wrong' "$out")" -eq 3 ] || fail "not every rank reported 0 wrong"
    ;;
  kill | kill-tcp | kill-shm)
    # kill: the default choice (shared memory on one host); kill-tcp / kill-shm
    # force the transport. The survivors must fail naming the victim within
    # 10 s of its death (the design target is a few seconds; the bound is
    # measured from the victim's own clock reading, not from the start of the
    # job, so start-up under ASan does not count), and no segment of the job
    # may be left in /dev/shm.
    np=4 victim=2
    transport=auto
    [ "$case_name" = kill-tcp ] && transport=tcp
    [ "$case_name" = kill-shm ] && transport=shm
    CHORUS_TRANSPORT=$transport run -np $np "$e2e" kill $victim >"$out" 2>"$err"
    rc=$?
    ended=$(date +%s%N)
    [ $rc -ne 124 ] || fail "timed out"
    # The first rank chorusrun reaps: the victim (SIGKILL) or a survivor (3).
    exit_status_in $rc 137 3 || fail "exit status $rc, expected 137 or 3"
    expect_peer_failure_reports "$out" $victim 0 1 3
    ! grep -q WRONG "$out" || fail "a rank computed a wrong result"
    token=$(job_token)
    [ -n "$token" ] || fail "no job token printed"
    left=$(segments_of "$token")
    [ -z "$left" ] || fail "segments of the job left in /dev/shm: $left"
    echo "killed rank $victim ($transport): job ended $(( (ended - killed_at) / 1000000 )) ms after the kill, status $rc"
    ;;
  split-kill)
    # A rank killed while its parent communicator and a split child are both
    # in use fails both on every survivor, naming it, within 10 s.
    np=4 victim=1
    run -np $np "$e2e" split-kill $victim >"$out" 2>"$err"
    rc=$?
    exit_status_in $rc 137 3 || fail "exit status $rc, expected 137 or 3"
    killed_at=$(grep -o "^rank $victim: killing myself at [0-9]*" "$out" | awk '{print $NF}')
    [ -n "$killed_at" ] || fail "the victim did not kill itself"
    for r in 0 2 3; do
      for which in parent child; do
        line=$(grep "^rank $r: $which failed at" "$out")
        [ -n "$line" ] || fail "rank $r: its $which did not fail"
        echo "$line" | grep -Eq "code (4|9): .*rank $victim" ||
          fail "rank $r: its $which failed without naming rank $victim: $line"
        seen=$(echo "$line" | awk '{print $6}' | tr -d :)
        lag=$(( (seen - killed_at) / 1000000 ))
        [ $lag -lt 10000 ] || fail "rank $r: its $which failed ${lag} ms after the kill"
      done
      echo "rank $r: parent and child failed naming rank $victim"
    done
    ;;
  p2p-kill)
    # A receive posted for a peer that dies fails naming it.
    run -np 3 "$e2e" p2p-kill 2 >"$out" 2>"$err"
    rc=$?
    exit_status_in $rc 137 3 || fail "exit status $rc, expected 137 or 3"
    grep -Eq "^rank 0: recv failed: code 4 .*rank 2" "$out" || fail "the receive did not fail naming rank 2"
    killed_at=$(grep -o "^rank 2: killing myself at [0-9]*" "$out" | awk '{print $NF}')
    seen=$(grep -o "^rank 0: recv failed at [0-9]*" "$out" | awk '{print $NF}')
    lag=$(( (seen - killed_at) / 1000000 ))
    [ $lag -lt 10000 ] || fail "the receive failed ${lag} ms after the kill"
    echo "rank 0's receive failed ${lag} ms after rank 2 died"
    ;;
  parked-abort)
    # Rank 0 sends rank 1 64 MiB that rank 1 does not receive (it waits in a
    # shared-memory allreduce), aborts, and lives on for 20 s: its abort
    # notice is queued behind the unread frame. Rank 1 must fail with
    # CHORUS_ERR_ABORTED and rank 0's reason within 5 s, not when rank 0
    # exits (PEER_FAILURE) or at the deadline.
    CHORUS_TIMEOUT=60 run -np 2 "$e2e" parked-abort 20 >"$out" 2>"$err"
    rc=$?
    exit_status_in $rc 3 || fail "exit status $rc, expected 3"
    grep -Eq "^rank 1: allreduce failed: code 9 .*parked-abort test" "$out" ||
      fail "rank 1 did not fail with rank 0's abort"
    aborted_at=$(grep -o "^rank 0: aborting at [0-9]*" "$out" | awk '{print $NF}')
    seen=$(grep -o "^rank 1: allreduce failed at [0-9]*" "$out" | awk '{print $NF}')
    lag=$(( (seen - aborted_at) / 1000000 ))
    [ $lag -lt 5000 ] || fail "rank 1 failed ${lag} ms after the abort"
    echo "rank 1's allreduce failed ${lag} ms after rank 0 aborted"
    ;;
  shm-setup-kill)
    # A rank really killed inside the shared-memory set-up window: rank 0 has
    # created the job's segment and waits for the others to map it (they
    # never do); it is killed there, so it never unlinks the segment.
    # chorusrun must remove the job's segment, and only the job's.
    other=/dev/shm/chorus-otherjob$$-e2e
    touch "$other"
    run -np 2 "$e2e" setup-kill >"$out" 2>"$err" &
    job=$!
    token="" pid=""
    for _ in $(seq 400); do
      token=$(job_token)
      pid=$(grep -o 'rank 0: pid [0-9]*' "$out" | awk '{print $NF}')
      [ -n "$token" ] && [ -n "$pid" ] && [ -n "$(segments_of "$token")" ] && break
      sleep 0.05
    done
    [ -n "$pid" ] || { rm -f "$other"; fail "rank 0 did not start joining"; }
    segment=$(segments_of "$token")
    [ -n "$segment" ] || { rm -f "$other"; fail "rank 0 created no segment"; }
    kill -9 "$pid"
    wait $job
    rc=$?
    [ -e "$other" ] || fail "chorusrun removed another job's segment"
    rm -f "$other"
    [ $rc -eq 137 ] || fail "exit status $rc, expected 137 (rank 0 killed)"
    left=$(segments_of "$token")
    [ -z "$left" ] || fail "segments left: $left"
    grep -q "removed shared-memory segment /dev/shm/$segment left by the job" "$err" ||
      fail "the removal of $segment was not reported"
    echo "rank 0 killed holding $segment; chorusrun removed it"
    ;;
  concurrent-shm)
    # Two jobs at once on one host: each uses its own segment (named from its
    # job token) and both compute correct results.
    out2=$(mktemp) err2=$(mktemp)
    CHORUS_LOG_LEVEL=debug run -np 3 --tag-output "$example" 1048573 >"$out" 2>"$err" &
    job1=$!
    CHORUS_LOG_LEVEL=debug run -np 3 --tag-output "$example" 1048573 >"$out2" 2>"$err2" &
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
    # Each host's two ranks still share a domain of their own (the host team's).
    CHORUS_LOG_LEVEL=debug run -np 4 --tag-output bash -c \
      'CHORUS_HOST_ID=host$((CHORUS_RANK / 2)) exec "$0" 1048573' "$example" >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    [ "$(grep -c ': 0 wrong' "$out")" -eq 4 ] || fail "not every rank reported 0 wrong"
    [ "$(grep -cE '2 of them on this host, on [0-9]+ CPUs; collectives through point-to-point algorithms' "$err")" -eq 4 ] ||
      fail "ranks on two hosts did not all leave shared memory out"
    joined=$(grep -o 'rank [01]: joined shared-memory segment chorus-[^ ]*' "$err" | sort -u)
    [ "$(echo "$joined" | wc -l)" -eq 4 ] || fail "not every rank joined a host domain: $joined"
    [ "$(echo "$joined" | awk '{print $NF}' | sort -u | wc -l)" -eq 2 ] ||
      fail "the two hosts did not get a domain each: $joined"
    ;;
  hierarchical)
    # Five ranks on two simulated hosts, placed round-robin (3 + 2): the
    # hierarchical allreduce, broadcast and allgather (shared memory within a
    # host, TCP across) and the ring in host order, forced, and the automatic
    # choice; every
    # collective's result is checked in full on every rank.
    for algo in hierarchical ring_by_host auto; do
      rules="allreduce:0-inf:$algo"
      [ $algo = hierarchical ] && rules="$rules;broadcast:0-inf:$algo;allgather:0-inf:$algo"
      [ $algo = auto ] && rules=""
      : >"$out"; : >"$err"
      CHORUS_LOG_LEVEL=debug CHORUS_ALGO="$rules" run -np 5 --tag-output bash -c \
        'CHORUS_HOST_ID=host$((CHORUS_RANK % 2)) exec "$0" check' "$e2e" >"$out" 2>"$err"
      rc=$?
      [ $rc -eq 0 ] || fail "$algo: exit status $rc"
      [ "$(grep -c 'all collectives correct' "$out")" -eq 5 ] || fail "$algo: wrong results"
      if [ $algo != auto ]; then
        [ "$(grep -cE "allreduce [0-9]+ bytes: $algo \(CHORUS_ALGO chose $algo" "$err")" -eq 10 ] ||
          fail "$algo: not every allreduce ran $algo"
      else
        grep -qE "allreduce [0-9]+ bytes: (hierarchical|ring_by_host) " "$err" ||
          fail "auto: no allreduce chose a host-aware algorithm across interleaved hosts"
      fi
      if [ $algo = hierarchical ]; then
        for kind in broadcast allgather; do
          grep -qE "$kind [0-9]+ bytes: hierarchical \(CHORUS_ALGO chose" "$err" ||
            fail "no $kind ran the hierarchical algorithm"
        done
        grep -qE "world stage: reduce_scatterv of [0-9]+ bytes on team host \(3 ranks\): shm" "$err" ||
          fail "the hierarchical allreduce did not reduce-scatter through shared memory within a host"
      fi
    done
    ;;
  bound)
    # Ranks bound one per CPU fit the host: the CPUs counted are the union of
    # their affinities, not each one's single CPU (which made every bound rank
    # think it outnumbered the cores and yield at every spin).
    cpus=$(( $(nproc) < 2 ? $(nproc) : 2 ))
    CHORUS_LOG_LEVEL=info run -np 2 --bind-to core --tag-output "$example" 100003 \
      >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    [ "$(grep -c ': 0 wrong' "$out")" -eq 2 ] || fail "not every rank reported 0 wrong"
    [ "$(grep -c "2 of them on this host, on $cpus CPUs" "$err")" -eq 2 ] ||
      fail "bound ranks did not count the $cpus CPUs they share"
    ;;
  mismatch)
    run -np 3 "$e2e" mismatch 1 >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 3 ] || fail "exit status $rc, expected 3 (the ranks' own failure status)"
    grep -Eq "code 5 .*rank 1 called allreduce #1 \(count 1001.*but rank [02] called allreduce #1 \(count 1000" "$out" ||
      grep -Eq "code 5 .*rank [02] called allreduce #1 \(count 1000.*but rank 1 called allreduce #1 \(count 1001" "$out" ||
      fail "no mismatch error naming both ranks and both calls"
    [ "$(grep -c ': allreduce failed: code' "$out")" -eq 3 ] || fail "not every rank failed"
    ;;
  api-rules)
    # Requests that outlive their communicator, and the last error per
    # communicator, on every rank of 2 and 3 over each transport.
    for transport in tcp shm; do
      for np in 2 3; do
        CHORUS_TRANSPORT=$transport run -np $np "$e2e" api-rules >"$out" 2>"$err"
        rc=$?
        [ $rc -eq 0 ] || fail "$transport, $np ranks: exit status $rc"
        [ "$(grep -c 'api rules hold' "$out")" -eq $np ] || fail "$transport, $np ranks: not every rank"
      done
    done
    ;;
  stranger)
    run -np 3 "$e2e" stranger >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    grep -q "was closed (refused)" "$out" || fail "the stranger was not refused"
    grep -q "refused connection from .*wrong job token" "$err" || fail "the refusal was not logged"
    [ "$(grep -c 'job completed' "$out")" -eq 3 ] || fail "the job did not complete on every rank"
    ;;
  forced)
    # CHORUS_TRANSPORT and CHORUS_ALGO forced through the communicator: every
    # collective's result is checked, and the debug log shows that the forced
    # transport and algorithm really ran.
    transports="tcp shm"
    [ "${E2E_UCX_BUILT:-}" = 1 ] && transports="tcp ucx shm"  # set by meson
    for transport in $transports; do
      algos="ring recursive_doubling"
      [ $transport = shm ] && algos="shm ring recursive_doubling"
      for algo in $algos; do
        rules="allreduce:0-inf:$algo"
        [ $algo = shm ] && rules="$rules;broadcast:0-inf:shm;allgather:0-inf:shm;reduce_scatter:0-inf:shm;barrier:0-inf:shm"
        [ $algo = ring ] && rules="$rules;broadcast:0-inf:ring;allgather:0-inf:ring;reduce_scatter:0-inf:ring;barrier:0-inf:dissemination"
        : >"$out"; : >"$err"
        CHORUS_LOG_LEVEL=debug CHORUS_TRANSPORT=$transport CHORUS_ALGO="$rules" \
          run -np 3 "$e2e" check >"$out" 2>"$err"
        rc=$?
        what="CHORUS_TRANSPORT=$transport CHORUS_ALGO=$rules"
        [ $rc -eq 0 ] || fail "$what: exit status $rc"
        [ "$(grep -c 'all collectives correct' "$out")" -eq 3 ] || fail "$what: wrong results"
        [ "$(grep -cE "allreduce [0-9]+ bytes: $algo \(CHORUS_ALGO chose $algo" "$err")" -eq 6 ] ||
          fail "$what: not every allreduce ran $algo"
        case $transport in
          shm) via="collectives through shared memory" ;;
          tcp) via="collectives through point-to-point algorithms, point-to-point over tcp)" ;;
          ucx) via="collectives through point-to-point algorithms, point-to-point over tcp\+ucx)" ;;
        esac
        [ "$(grep -cE "ready .*$via" "$err")" -eq 3 ] || fail "$what: not every rank used $transport"
        echo "$what: correct"
      done
    done
    ;;
  algo-refused)
    # An algorithm that refuses the call (shared memory over TCP) is skipped,
    # with the reason in the log; an unknown one fails init naming it.
    CHORUS_LOG_LEVEL=debug CHORUS_TRANSPORT=tcp CHORUS_ALGO="allreduce:0-inf:shm" \
      run -np 2 "$e2e" check >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    [ "$(grep -c 'all collectives correct' "$out")" -eq 2 ] || fail "wrong results"
    grep -q "CHORUS_ALGO chose shm, which refused: no shared-memory domain" "$err" ||
      fail "the refusal was not logged"
    : >"$out"; : >"$err"
    CHORUS_ALGO="allreduce:0-inf:bogus_algo" run -np 2 "$e2e" check >"$out" 2>"$err"
    rc=$?
    [ $rc -eq 3 ] || fail "unknown algorithm: exit status $rc, expected 3"
    [ "$(grep -c "init failed: code 1 .*CHORUS_ALGO: allreduce has no algorithm 'bogus_algo'" "$out")" -eq 2 ] ||
      fail "init did not fail naming the unknown algorithm on every rank"
    ;;
  algo-mismatch)
    # Ranks configured with different CHORUS_ALGO must fail as a mismatch
    # (the algorithm is part of the call's signature), never compute.
    for transport in tcp shm; do
      : >"$out"; : >"$err"
      CHORUS_TRANSPORT=$transport run -np 2 bash -c \
        'if [ "$CHORUS_RANK" = 0 ]; then a=ring; else a=recursive_doubling; fi
         CHORUS_ALGO=allreduce:0-inf:$a exec "$0" check' "$e2e" >"$out" 2>"$err"
      rc=$?
      [ $rc -eq 3 ] || fail "$transport: exit status $rc, expected 3"
      [ "$(grep -c 'allreduce failed: code' "$out")" -eq 2 ] || fail "$transport: not every rank failed"
      grep -Eq "code 5 .*rank [01] called allreduce #1 \(count 100003, int32, sum, algorithm (ring|recursive_doubling)\) but rank [01] called allreduce #1 \(count 100003, int32, sum, algorithm (ring|recursive_doubling)\)" "$out" ||
        fail "$transport: no mismatch naming both ranks' algorithms"
      echo "$transport: different CHORUS_ALGO failed as a mismatch"
    done
    ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
# Nothing of the job may survive it.
for _ in $(seq 50); do
  left=$(marked)
  [ -z "$left" ] && break
  sleep 0.1
done
[ -z "$left" ] || fail "processes left behind: $(for p in $left; do tr '\0' ' ' </proc/$p/cmdline; echo; done)"
echo "PASS ($case_name)"
