#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite twice: an optimised build and
# an AddressSanitizer + UBSan build (any sanitizer report fails the run).
# Ends with a line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh || { echo "0 passed, 1 failed"; exit 1; }

passed=0
failed=0
run_suite() {
  local dir=$1; shift
  echo "=== build $dir ($*)"
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; failed=$((failed + 1)); return; }
  fi
  if ! ninja -C "$dir" >"$dir.build.log" 2>&1; then
    tail -n 60 "$dir.build.log"; failed=$((failed + 1)); return
  fi
  echo "=== test $dir"
  meson test -C "$dir" --print-errorlogs --num-processes 2 2>&1 | tee "$dir.test.log" | grep -E '^ *[0-9]+/[0-9]+ ' || true
  local ok fail
  ok=$(grep -cE '^ *[0-9]+/[0-9]+ .* (OK|EXPECTEDFAIL|SKIP) ' "$dir.test.log")
  fail=$(grep -cE '^ *[0-9]+/[0-9]+ .* (FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS) ' "$dir.test.log")
  if [ "$fail" -gt 0 ]; then sed -n '/^Summary of Failures/,$p' "$dir.test.log"; fi
  passed=$((passed + ok))
  failed=$((failed + fail))
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_suite build-release -Dbuildtype=release
run_suite build-asan -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false

echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
