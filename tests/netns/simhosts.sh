# Simulated hosts: network namespaces joined by a bridge, each host's egress
# limited with tbf. Sourced by the tests (functions below), or run:
#   simhosts.sh up H RATE    create H hosts (prints their names, one a line)
#   simhosts.sh down         remove what `up` made under this shell's PID (see SIMHOSTS_ID)
#   simhosts.sh sweep        remove what runs of dead processes left behind
#
# Layout for a run with id ID (the PID of the test, so that names are unique
# per run and a sweeper can tell leftovers of dead runs):
#   chsIDsw          the switch: a namespace holding only the bridge br0 and
#                    one veth end p<i> per host. The bridge lives there, not
#                    in the root namespace, so that no address or link of
#                    the test network ever appears on this machine itself.
#   chsIDh0..h<H-1>  the hosts: lo up, eth0 (the other veth end) with
#                    10.250.0.<i+1>/24, egress shaped by tbf, and
#                    /etc/netns/<name>/hosts naming every host (`ip netns
#                    exec` bind-mounts it over /etc/hosts, so the host names
#                    resolve inside the namespaces and nowhere else).
# Everything is removed by `simhosts_down` (processes left in the namespaces
# are killed first), which the tests run from their EXIT trap; a run killed
# before its trap ran is cleaned by the next `simhosts_sweep`.

SIMHOSTS_SUBNET=10.250.0

# simhosts_burst RATE: tbf's bucket in bytes. The kernel refills it on timer
# ticks and veth hands it GSO packets of up to 64 KiB, so it must hold a
# millisecond of traffic at the rate and at least one 64 KiB segment: less
# and tbf cannot reach the rate (1gbit: 128 KiB, 10gbit: 1.25 MB).
simhosts_burst() {
  local rate=$1 number unit bits
  number=${rate%%[a-zA-Z]*}
  unit=${rate#"$number"}
  case $unit in
    gbit) bits=$((number * 1000000000)) ;;
    mbit) bits=$((number * 1000000)) ;;
    kbit) bits=$((number * 1000)) ;;
    bit | "") bits=$number ;;
    *) echo "simhosts: rate '$rate': use Nkbit, Nmbit or Ngbit" >&2; return 1 ;;
  esac
  local per_ms=$((bits / 8 / 1000))
  [ $per_ms -lt 131072 ] && per_ms=131072
  echo $per_ms
}

# simhosts_remove_id ID: removes every namespace and hosts file of run ID.
simhosts_remove_id() {
  local id=$1 ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^chs${id}(h[0-9]+|sw)$"); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  rm -rf /etc/netns/chs"${id}"h* 2>/dev/null
  rmdir /etc/netns 2>/dev/null  # only when empty: others may use it
  return 0
}

# simhosts_alive ID: whether process ID runs (a zombie, killed but not yet
# reaped by its parent, does not).
simhosts_alive() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${state:0:1}" != Z ]
}

# simhosts_sweep: removes the leftovers of runs whose process is gone.
simhosts_sweep() {
  local id
  for id in $( (ip netns list 2>/dev/null | awk '{print $1}'; ls /etc/netns 2>/dev/null) |
    sed -nE 's/^chs([0-9]+)(h[0-9]+|sw)$/\1/p' | sort -u); do
    simhosts_alive "$id" || simhosts_remove_id "$id"
  done
}

# simhosts_up H RATE: creates the hosts of this run (id SIMHOSTS_ID, default
# $$) and sets SIMHOSTS to their names. Returns 77 when namespaces cannot be
# made here (not root, no CAP_SYS_ADMIN), 1 on any other failure.
simhosts_up() {
  local count=$1 rate=$2 id=${SIMHOSTS_ID:-$$} burst i host
  burst=$(simhosts_burst "$rate") || return 1
  simhosts_sweep
  local sw=chs${id}sw
  if ! ip netns add "$sw" 2>/dev/null; then
    echo "simhosts: cannot create network namespaces here (needs root / CAP_SYS_ADMIN)" >&2
    return 77
  fi
  SIMHOSTS=()
  ip -n "$sw" link add br0 type bridge &&
    ip -n "$sw" link set br0 up || { simhosts_remove_id "$id"; return 1; }
  for ((i = 0; i < count; i++)); do
    host=chs${id}h$i
    SIMHOSTS+=("$host")
    # Both veth ends are created straight inside their namespaces.
    ip netns add "$host" &&
      ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$host" &&
      ip -n "$sw" link set "p$i" master br0 up &&
      ip -n "$host" link set lo up &&
      ip -n "$host" addr add "$SIMHOSTS_SUBNET.$((i + 1))/24" dev eth0 &&
      ip -n "$host" link set eth0 up &&
      ip netns exec "$host" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 50ms ||
      { echo "simhosts: setting up $host failed" >&2; simhosts_remove_id "$id"; return 1; }
  done
  for ((i = 0; i < count; i++)); do
    mkdir -p "/etc/netns/${SIMHOSTS[i]}"
    {
      echo "127.0.0.1 localhost"
      for ((j = 0; j < count; j++)); do echo "$SIMHOSTS_SUBNET.$((j + 1)) ${SIMHOSTS[j]}"; done
    } >"/etc/netns/${SIMHOSTS[i]}/hosts"
  done
  return 0
}

simhosts_down() {
  simhosts_remove_id "${SIMHOSTS_ID:-$$}"
}

# Run as a command: the id is the parent's PID (the shell that calls us), so
# `up` and `down` from one script agree and a sweep sees when it is gone.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  SIMHOSTS_ID=${SIMHOSTS_ID:-$PPID}
  case ${1:-} in
    up)
      [ $# = 3 ] || { echo "usage: $0 up H RATE" >&2; exit 2; }
      simhosts_up "$2" "$3" || exit $?
      printf '%s\n' "${SIMHOSTS[@]}"
      ;;
    down) simhosts_down ;;
    sweep) simhosts_sweep ;;
    *) echo "usage: $0 up H RATE | down | sweep" >&2; exit 2 ;;
  esac
fi
