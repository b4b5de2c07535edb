# --bind-to: core pins rank r to the r-th usable CPU, none (the default)
# leaves the launcher's CPU set, auto binds only when every rank gets a CPU.
. "$(dirname "$0")/common.sh"

allowed=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
ncpu=$(nproc)
show='echo "$CHORUS_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"'

out=$("$CHORUSRUN" -np 2 bash -c "$show") || fail "chorusrun failed"
echo "$out"
[ "$(echo "$out" | cut -d' ' -f2 | sort -u)" = "$allowed" ] || fail "--bind-to none changed the CPU set"

out=$("$CHORUSRUN" -np 2 --bind-to core bash -c "$show") || fail "chorusrun failed"
echo "$out"
echo "$out" | while read -r rank cpus; do
  [[ "$cpus" =~ ^[0-9]+$ ]] || fail "rank $rank not bound to one CPU: $cpus"
done || exit 1
if [ "$ncpu" -ge 2 ]; then
  [ "$(echo "$out" | cut -d' ' -f2 | sort -u | wc -l)" = 2 ] || fail "two ranks share a CPU"
fi

# auto: more ranks than CPUs means no binding.
out=$("$CHORUSRUN" -np $((ncpu + 1)) --bind-to auto bash -c "$show") || fail "chorusrun failed"
[ "$(echo "$out" | cut -d' ' -f2 | sort -u)" = "$allowed" ] || fail "auto bound an oversubscribed job"
out=$("$CHORUSRUN" -np 1 --bind-to auto bash -c "$show") || fail "chorusrun failed"
[[ "$(echo "$out" | cut -d' ' -f2)" =~ ^[0-9]+$ ]] || fail "auto did not bind a job that fits"
echo PASS
