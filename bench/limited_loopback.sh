#!/usr/bin/env bash
# Runs a command in a network namespace of its own whose loopback is limited
# to RATE by tc tbf, so that ranks of one host talk over TCP as through a
# slow link (both directions share the RATE: a 1gbit loopback carries at most
# 0.125 GB/s in all). The namespace goes when the command ends, fails or is
# interrupted. Needs root (ip netns, tc). Example, compression on the wire
# through a 1 Gbit/s link:
#
#   bench/limited_loopback.sh 1gbit build/tools/chorusrun -np 2 \
#       build/bench/chorus-bench allreduce -t tcp -b 16M -e 64M -f 2 --wire none,bf16,f16
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 RATE COMMAND [ARGS...]   (RATE as tc writes it: 1gbit, 10gbit, 500mbit)" >&2
  exit 2
fi
rate=$1
shift
ns=chorus-link-$$
cleanup() { ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
ip netns exec "$ns" tc qdisc add dev lo root tbf rate "$rate" burst 256kb latency 200ms
echo "# loopback of namespace $ns: $(ip netns exec "$ns" tc qdisc show dev lo)" >&2
ip netns exec "$ns" "$@"
