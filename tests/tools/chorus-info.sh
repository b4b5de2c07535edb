# chorus-info: the registry, the plan and the transports, offline and inside a
# job. Usage: chorus-info.sh CHORUS_INFO CHORUSRUN. Every command's output is
# captured first and its exit status checked (a crash after printing the
# expected line must fail), then searched.
set -uo pipefail
info=$1 chorusrun=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect "WHAT" PATTERN COMMAND...: COMMAND succeeds and prints a line matching PATTERN.
expect() {
  local what=$1 pattern=$2 out
  shift 2
  out=$("$@" 2>&1) || fail "$what: exit status $? from $*: $out"
  grep -qE -- "$pattern" <<<"$out" || fail "$what: no line matching '$pattern' in: $out"
}
expect "config lists CHORUS_TIMEOUT" '^CHORUS_TIMEOUT ' "$info" --config
expect "plan honours CHORUS_ALGO" 'CHORUS_ALGO chose ring' env CHORUS_ALGO=allreduce:0-inf:ring "$info" --plan --np 4
expect "plan: oversubscribed hosts take recursive doubling" recursive_doubling "$info" --plan --np 8 --ranks-on-host 4
CHORUS_TIMEOUT=-1 "$info" --config >/dev/null 2>&1 && fail "CHORUS_TIMEOUT=-1 was accepted"
expect "plan: one host is shared memory" 'shared memory: all 4 ranks share this host' "$info" --plan --np 4
expect "plan: shared memory chosen at 8 bytes" '^ +8 +shm ' "$info" --plan --np 4
expect "plan: refusals listed" 'shm: .*refused here: no shared-memory domain' "$info" --plan --np 8 --ranks-on-host 4
expect "plan of another collective" '^reduce plan for 4 ranks' "$info" --plan --np 4 --collective reduce
"$info" --plan --collective nosuch >/dev/null 2>&1 && fail "--collective nosuch was accepted"
# On 1 Gbit/s links the network dominates, and the hierarchical allreduce
# sends a host's share across once; at 10 Gbit/s with 4 ranks a host, the
# model finds the ring's overlap of reduction and network worth more.
expect "plan across hosts: the hierarchical allreduce for large calls on slow links" \
  '^ +128M +hierarchical ' env CHORUS_NET_GBPS=1 "$info" --plan --np 8 --hosts a,a,a,a,b,b,b,b
expect "plan across hosts: ranks placed round-robin never take the ring in rank order" \
  '^ +128M +(hierarchical|ring_by_host) ' "$info" --plan --np 8 --hosts a,b,a,b,a,b,a,b
expect "plan across hosts: the hierarchical broadcast is a candidate" 'hierarchical: a broadcast among' \
  "$info" --plan --np 4 --hosts a,b,a,b --collective broadcast
"$info" --plan --np 4 --hosts a,b >/dev/null 2>&1 && fail "--hosts with fewer labels than ranks was accepted"
expect "transports: one host" '^collectives: shared memory' "$info" --transports --np 2
expect "transports: two hosts" '^collectives: point-to-point algorithms \(the 4 ranks run on 2 hosts\)' \
  "$info" --transports --np 4 --hosts a,a,b,b
expect "transports: forced TCP" 'rank 1 -> rank 0: tcp \(CHORUS_TRANSPORT=tcp\)' \
  env CHORUS_TRANSPORT=tcp "$info" --transports --np 2
# --topology offline: this host through hwloc, as many hardware threads as
# the kernel has online, and the two link classes with the defaults.
expect "topology: hardware threads" "^host .*: [0-9]+ package\\(s\\), .* $(getconf _NPROCESSORS_ONLN) hardware thread\\(s\\)" \
  "$info" --topology
expect "topology: same host" '^  same host: shared memory alpha' "$info" --topology
expect "topology: other host, default" '^  other host: alpha 30.0 us, 10.000 Gbit/s \(default' "$info" --topology
expect "topology: other host, set" 'other host: alpha 30.0 us, 2.500 Gbit/s \(CHORUS_NET_ALPHA_US/CHORUS_NET_GBPS' \
  env CHORUS_NET_GBPS=2.5 "$info" --topology
# Inside a job on one host: the host map, one leader, no probe.
out=$(timeout 60 "$chorusrun" -np 2 "$info" --topology 2>&1) || fail "job --topology: exit status $?: $out"
grep -q "^2 rank(s) on 1 host(s)" <<<"$out" || fail "job --topology: no host map: $out"
grep -q "ranks 0,1; leader rank 0" <<<"$out" || fail "job --topology: no leader: $out"
grep -q "other host: none in this job" <<<"$out" || fail "job --topology: a link between hosts: $out"
[ "$(grep -c '^rank [01]: other host alpha_us=30 gbps=10 source=default probe_ms=0.0' <<<"$out")" = 2 ] ||
  fail "job --topology: rank lines: $out"
# Inside a job: the job's host identities, and TCP between every pair.
out=$(timeout 60 "$chorusrun" -np 3 "$info" --transports 2>&1) || fail "job: exit status $?: $out"
grep -q "host identities of this job via chorusrun" <<<"$out" || fail "job: no host identities: $out"
pairs=$(grep -cE '^rank [0-2] -> rank [0-2]: tcp' <<<"$out")
[ "$pairs" = 6 ] || fail "job: $pairs TCP pairs, expected 6: $out"
echo PASS
