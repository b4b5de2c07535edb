#!/usr/bin/env bash
# Starts N TensorFlow workers of one job on this machine, each with its own
# TF_CONFIG (one free 127.0.0.1 port per worker), and waits for all of them:
#   examples/train/tf_workers.sh N python3 examples/train/train_tf.py ...
# Exit status: 0 when every worker exits 0, else that of the first to fail
# (the others are then stopped). Stand-in for chorusrun --tf-config until it
# gives each worker an address of its own.
set -uo pipefail
n="$1"; shift
ports=$(python3 - "$n" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
)
workers=$(printf '"127.0.0.1:%s",' $ports)
workers="[${workers%,}]"
pids=()
for ((i = 0; i < n; i++)); do
  TF_CONFIG="{\"cluster\": {\"worker\": $workers}, \"task\": {\"type\": \"worker\", \"index\": $i}}" "$@" &
  pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null' INT TERM
status=0
running=("${pids[@]}")
while [ ${#running[@]} -gt 0 ]; do
  still=()
  for pid in "${running[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      still+=("$pid")
      continue
    fi
    wait "$pid"
    rc=$?
    if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then
      status=$rc
      kill "${pids[@]}" 2>/dev/null
    fi
  done
  running=("${still[@]+"${still[@]}"}")
  [ ${#running[@]} -gt 0 ] && sleep 0.2
done
exit "$status"
