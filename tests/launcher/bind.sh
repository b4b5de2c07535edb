# --bind-to: core pins rank r to the r-th usable CPU, none leaves the
# launcher's CPU set, auto (the default) binds jobs of 2 ranks or more only
# when every rank gets a CPU.
. "$(dirname "$0")/common.sh"

allowed=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
ncpu=$(nproc)
show='echo "$CHORUS_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"'

out=$("$CHORUSRUN" -np 2 --bind-to none bash -c "$show") || fail "chorusrun failed"
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
[ "$(echo "$out" | cut -d' ' -f2)" = "$allowed" ] || fail "auto bound a job of one rank"
if [ "$ncpu" -ge 2 ]; then
  # The default is auto: a job that fits is bound, one rank per CPU.
  out=$("$CHORUSRUN" -np 2 bash -c "$show") || fail "chorusrun failed"
  echo "$out"
  echo "$out" | while read -r rank cpus; do
    [[ "$cpus" =~ ^[0-9]+$ ]] || fail "default: rank $rank of a job that fits not bound: $cpus"
  done || exit 1
  [ "$(echo "$out" | cut -d' ' -f2 | sort -u | wc -l)" = 2 ] || fail "default: two ranks share a CPU"
fi
echo PASS
