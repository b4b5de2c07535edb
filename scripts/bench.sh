#!/usr/bin/env bash
# Sets up, builds (optimised, in build-release) and runs a short, checked
# allreduce sweep on 4 local ranks:
#
#   chorusrun -np 4 chorus-bench allreduce -b 8 -e 64M -f 4 -c 1
#
# Every element of one extra op per size is checked; the exit status is
# non-zero when any element is wrong or any rank fails.
#
#   scripts/bench.sh                  the sweep above
#   scripts/bench.sh --compare [...]  bench/compare.py instead (Chorus vs Open MPI
#                                     over TCP, 2 ranks, 8 B..256 MiB, medians of
#                                     3 runs); further arguments go to compare.py
#   scripts/bench.sh -- ARGS...       extra chorus-bench arguments (e.g. -- -d float64)
#
# Environment: BUILD_DIR (default build-release), NP (default 4), MAX_BYTES
# (default 64M), BENCH_TIMEOUT (seconds for the whole sweep, default 600).
# See docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${BUILD_DIR:-build-release}
np=${NP:-4}
max_bytes=${MAX_BYTES:-64M}
timeout=${BENCH_TIMEOUT:-600}
mode=sweep
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --compare) mode=compare; shift; extra=("$@"); break ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

./scripts/install-deps.sh
if [ ! -f "$build_dir/build.ninja" ]; then
  meson setup "$build_dir" -Dbuildtype=release
fi
ninja -C "$build_dir"

if [ "$mode" = compare ]; then
  exec python3 bench/compare.py --build-dir "$build_dir" "${extra[@]}"
fi

set -x
"$build_dir/tools/chorusrun" -np "$np" --timeout "$timeout" \
  "$build_dir/bench/chorus-bench" allreduce -b 8 -e "$max_bytes" -f 4 -c 1 "${extra[@]}"
