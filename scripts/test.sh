#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite in an optimised build, a
# representative subset of it in an AddressSanitizer + UBSan build (ASAN_TESTS
# below), the fuzz targets and a ThreadSanitizer slice. Ends with a line
#
#   N passed, N failed, N skipped
#
# and exits non-zero on any failure. What counts comes from meson's own
# results (meson-logs/testlog.json) and exit status, never from its console
# text (scripts/ci_results.py):
# - a test FAILs, TIMEOUTs, ERRORs or is INTERRUPTed: failed;
# - a sanitizer report from any process a test started: failed (every test
#   runs under scripts/test-wrapper.sh, which collects them);
# - a test the build defines without a result, or a build that defines none:
#   failed; meson test exiting non-zero with nothing else to show: failed;
# - a skip: counted apart, and failed unless the test is in EXPECTED_SKIPS
#   (none today: CI builds every optional part, UCX included, -Ducx=enabled);
# - a build directory left from an earlier run is reconfigured with this
#   run's options, and checked to have them, before it is reused.
#
# Suite tsan (ThreadSanitizer, -O1 with line tables) builds only what its
# tests need and runs the threaded ones, any TSan report failing the test
# (TSAN_OPTIONS below; the only suppression, scripts/tsan.supp, is for
# synchronisation inside the uninstrumented libstdc++):
#   tcp               TCP transport: progress thread, thread ranks, failures;
#   bootstrap         TCP store server threads and clients shared by threads,
#                     file store across threads;
#   c-api             communicators of thread ranks: worker thread, blocking
#                     and non-blocking calls, waits/tests, p2p, split, abort;
#                     over shared memory, TCP and UCX;
#   ucx, ucx-tcp      UCX transport: progress thread, thread ranks (UCX itself
#                     is not instrumented; UCX_MEM_EVENTS=no: UCX's madvise
#                     hook crashes TSan's runtime when a thread exits);
#   tsan-coll-inproc  coll_tests sliced by Catch2 tags: inproc transport,
#                     failures, barrier, sequences, broadcast and gather sweeps;
#   tsan-coll-tcp     coll_tests_tcp sliced: ring allreduce (not [large]),
#                     reduce_scatter, allgather, broadcast, reduce, scatter,
#                     alltoall over real TCP (tests/coll/meson.build);
#   tsan-coll-tcp-rounds  its other half, run beside it: the ring and
#                     Rabenseifner allreduces in rounds;
#   tsan-fusion       the fusion engine's thread with submitting and waiting
#                     threads: every fusion case but the long 200-tensor sweep.
# Not run there: unit (no threads), coll-shm, coll-ucx*, e2e/launcher/faults
# (processes through chorusrun), and the full coll sweeps (the release and
# asan suites run them).
#
# Environment: TEST_SUITES (default "release asan fuzz tsan"), SUITE_TESTS (only
# these tests, e.g. "coll-tcp tcp", with TEST_SUITES=release or asan),
# MESON_TEST_ARGS (extra arguments for meson test), FUZZ_SECONDS (how
# long each fuzz target of suite fuzz runs, default 25; tests/fuzz).
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }

EXPECTED_SKIPS=()
passed=0
failed=0
skipped=0
wrapper=$(pwd)/scripts/test-wrapper.sh

# run_suite DIR KEY=VALUE...: the options are given to meson setup as -D and
# checked afterwards. SETUP_ENV (e.g. "CC=clang-14 CXX=clang++-14"): the
# environment of meson setup; SUITE_TEST_ARGS: more arguments for meson test;
# SUITE_TESTS: the names of the only tests to run (then only the targets they
# need are built, and only they must have a result; default: all of them).
run_suite() {
  local dir=$1; shift
  local opts=() pair
  for pair in "$@"; do opts+=("-D$pair"); done
  echo "=== build $dir ($*)"
  # shellcheck disable=SC2206
  local setup=(env ${SETUP_ENV:-} meson setup "$dir" "${opts[@]}")
  # shellcheck disable=SC2206
  [ -f "$dir/build.ninja" ] &&
    setup=(env ${SETUP_ENV:-} meson setup --reconfigure "$dir" "${opts[@]}")
  if ! "${setup[@]}" >"$dir.setup.log" 2>&1; then
    cat "$dir.setup.log"; echo "FAILED: meson setup of $dir"; failed=$((failed + 1)); return
  fi
  if ! python3 scripts/ci_results.py options "$dir" "$@"; then
    echo "FAILED: $dir is not configured as asked"; failed=$((failed + 1)); return
  fi
  local tests=() only_args=() targets name
  # shellcheck disable=SC2206
  tests=(${SUITE_TESTS:-})
  local build=(ninja -C "$dir")
  if [ ${#tests[@]} -gt 0 ]; then
    if ! targets=$(python3 scripts/ci_results.py targets "$dir" "${tests[@]}"); then
      echo "FAILED: $dir does not define the tests asked for"; failed=$((failed + 1)); return
    fi
    # shellcheck disable=SC2206
    build+=($targets)
    for name in "${tests[@]}"; do only_args+=(--only "$name"); done
  fi
  if ! "${build[@]}" >"$dir.build.log" 2>&1; then
    tail -n 60 "$dir.build.log"; echo "FAILED: build of $dir"; failed=$((failed + 1)); return
  fi
  echo "=== test $dir"
  rm -f "$dir"/meson-logs/testlog*.json
  # shellcheck disable=SC2086
  meson test -C "$dir" --print-errorlogs --num-processes 2 --wrapper "$wrapper" \
    ${SUITE_TEST_ARGS:-} "${tests[@]}" ${MESON_TEST_ARGS:-} >"$dir.test.log" 2>&1
  local meson_rc=$?
  grep -E '^ *[0-9]+/[0-9]+ ' "$dir.test.log"
  local skip_args=() name
  for name in "${EXPECTED_SKIPS[@]}"; do skip_args+=(--expect-skip "$name"); done
  local summary
  summary=$(python3 scripts/ci_results.py summary "$dir" "${skip_args[@]}" "${only_args[@]}")
  local counts=${summary##*$'\n'}
  [ "$counts" != "$summary" ] && echo "${summary%$'\n'*}"
  local ok fail skip
  read -r ok fail skip <<<"$counts"
  if ! [[ "$ok" =~ ^[0-9]+$ && "$fail" =~ ^[0-9]+$ && "$skip" =~ ^[0-9]+$ ]]; then
    echo "FAILED: could not read the results of $dir: $summary"
    failed=$((failed + 1)); return
  fi
  if [ "$meson_rc" -ne 0 ] && [ "$fail" -eq 0 ]; then
    echo "FAILED: meson test exited $meson_rc although no test result says why"
    tail -n 30 "$dir.test.log"
    fail=1
  fi
  if [ "$fail" -gt 0 ]; then sed -n '/^Summary of Failures/,$p' "$dir.test.log"; fi
  echo "=== $dir: $ok passed, $fail failed, $skip skipped"
  passed=$((passed + ok))
  failed=$((failed + fail))
  skipped=$((skipped + skip))
}

# The AddressSanitizer suite's representative subset (building everything
# under ASan alone took 29 of CI's 56 minutes): every unit, the
# collective sweeps over the in-process and shared-memory transports but
# their exhaustive million-element ring sweep (tests/coll/meson.build; the
# TCP and UCX variants compile the same sweeps three more times; the release
# suite runs them, and the transports' own tests run here), the transports,
# the C API, fusion, the strategies, and the end-to-end and fault cases that
# kill, mismatch or feed garbage to real processes. Like TSan it builds at -O1
# with line tables only (-g1): ASan's instrumentation at -O2 -g made each
# library file take 70-170 s to compile, and -O1 is what ASan's own
# documentation recommends for usable reports. UBSan runs every check but
# alignment, null and object-size, which doubled the compile time of a file
# with ASan (communicator.cpp: 22 s with ASan alone, 44 s with all of UBSan,
# 26 s without those three) for little: ASan itself reports a null
# dereference (SEGV, with its stack) and an access past an object; and the
# fuzz suite, which feeds the wire decoders (where a misaligned read could
# come from), runs all of UBSan.
ASAN_TESTS="unit coll-inproc coll-shm bootstrap tcp ucx ucx-tcp c-api c-api-store c-api-wire-env
  fusion fusion-timeline strategy e2e-example e2e-kill-tcp e2e-kill-shm e2e-mismatch
  e2e-split-kill e2e-p2p-kill e2e-stranger e2e-api-rules fault-killed fault-destroyed
  fault-malformed-frame fault-truncated fault-bad-argument launcher-env launcher-kill9 launcher-tf-config"
# Unity builds (meson's unity=on: up to 8 sources of a target compiled as one):
# the headers (fmt, spdlog, nlohmann-json, the standard library) and the
# sanitizers' instrumentation of what they instantiate are paid once per 8
# files instead of once per file. libchorus's files took 1492 s of compiler
# time under ASan separately, 707 s in unity; the ASan build went from 14.5
# to 10.4 minutes, the release build from 9.7 to 7. So names in anonymous
# namespaces must be unique within a target (README.md).
UNITY="unity=on unity_size=8"
UBSAN_SKIPPED="-fno-sanitize=alignment,null,object-size"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# halt_on_error: the first race ends the process (exit 66) and fails the test.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$(pwd)/scripts/tsan.supp"
for suite in ${TEST_SUITES:-release asan fuzz tsan}; do
  case $suite in
    release) run_suite build-release buildtype=release b_sanitize=none ucx=enabled $UNITY ;;
    asan) SUITE_TESTS=${SUITE_TESTS:-$ASAN_TESTS} \
            run_suite build-asan buildtype=custom optimization=1 debug=false \
            "cpp_args=-g1 $UBSAN_SKIPPED" "c_args=-g1 $UBSAN_SKIPPED" \
            b_sanitize=address,undefined b_lundef=false ucx=enabled $UNITY ;;
    fuzz) SETUP_ENV="CC=clang-14 CXX=clang++-14" SUITE_TEST_ARGS="--suite fuzz" \
            SUITE_TESTS="fuzz_tcp_frame fuzz_tcp_hello fuzz_store_server fuzz_store_wire fuzz_ucx_wire" \
            run_suite build-fuzz buildtype=debugoptimized fuzz=enabled \
            fuzz_seconds="${FUZZ_SECONDS:-25}" ;;
    tsan) SUITE_TESTS="tcp bootstrap c-api ucx ucx-tcp tsan-coll-inproc tsan-coll-tcp tsan-coll-tcp-rounds tsan-fusion" \
            UCX_MEM_EVENTS=no \
            run_suite build-tsan buildtype=custom optimization=1 debug=false cpp_args=-g1 \
            c_args=-g1 b_sanitize=thread ucx=enabled $UNITY ;;
    *) echo "FAILED: unknown suite $suite"; failed=$((failed + 1)) ;;
  esac
done

echo "${passed} passed, ${failed} failed, ${skipped} skipped"
[ "$failed" -eq 0 ]
