# The simulated hosts themselves (simhosts.sh): names resolve inside the
# namespaces only, hosts reach each other, tbf holds each host's egress to its
# rate, nothing of the test network appears in the root namespace, and a run
# killed before its cleanup is swept by the next.
. "$(dirname "$0")/common.sh"

netns_setup 2 1gbit
h0=${SIMHOSTS[0]} h1=${SIMHOSTS[1]}
[ "$(on "$h0" getent hosts "$h1" | awk '{print $1}')" = "$SIMHOSTS_SUBNET.2" ] ||
  fail "$h1 does not resolve on $h0"
getent hosts "$h1" >/dev/null && fail "$h1 resolves outside the namespaces"
ip -o addr | grep -q "$SIMHOSTS_SUBNET\." && fail "a test address is in the root namespace"
on "$h0" tc qdisc show dev eth0 | grep -q "tbf .*rate 1Gbit" || fail "no tbf on $h0"

# send_mb HOST_FROM HOST_TO MB: seconds to push MB megabytes over TCP.
send_mb() {
  on "$2" python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5201)); s.listen(1); c, _ = s.accept()
while c.recv(1 << 20): pass' &
  sleep 0.5
  on "$1" python3 -c '
import socket, sys, time
for _ in range(50):
    try:
        s = socket.create_connection((sys.argv[1], 5201)); break
    except OSError: time.sleep(0.1)
data = b"x" * (1 << 20); start = time.time()
for _ in range(int(sys.argv[2])): s.sendall(data)
s.shutdown(socket.SHUT_WR); s.recv(1); print(f"{time.time() - start:.3f}")' "$3" "$4"
  wait
}
# 100 MB at 1 Gbit/s take at least 0.8 s; unshaped veth moves them in a
# fraction of that. (The 10gbit case is not measured: on a 2-core test
# machine the senders, not tbf, stop near 5 Gbit/s, shaped or not.)
t=$(send_mb "$h0" "$h1" "$h1" 100) || fail "no TCP between the hosts"
echo "100 MB at 1gbit: $t s"
python3 -c "import sys; sys.exit(0 if float('$t') >= 0.7 else 1)" || fail "1gbit link moved 100 MB in $t s"
simhosts_down

# A run killed before its cleanup: the next sweep removes what it made.
bash -c ". '$(dirname "$0")/simhosts.sh'; simhosts_up 2 10gbit && exec sleep 60" &
victim=$!
for _ in $(seq 100); do
  [ -f "/etc/netns/chs${victim}h1/hosts" ] && break
  sleep 0.1
done
on "chs${victim}h0" tc qdisc show dev eth0 | grep -q "rate 10Gbit" || fail "no 10gbit host"
kill -9 $victim
wait $victim 2>/dev/null
simhosts_sweep
ip netns list | grep -q "^chs${victim}" && fail "sweep left namespaces: $(ip netns list)"
[ -e "/etc/netns/chs${victim}h0" ] && fail "sweep left hosts files"
echo PASS
