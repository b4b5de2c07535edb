#!/usr/bin/env bash
# Runs one test (meson test --wrapper) so that a sanitizer report from ANY
# process it starts fails it: tests that start ranks through chorusrun often
# keep the ranks' stderr in temporary files, where a report would be lost.
# Every process of the test writes its reports to a directory of its own
# (ASAN/UBSAN/LSAN log_path); afterwards the reports are printed into the
# test's output and the test fails, whatever its own exit status was.
set -u
reports=$(mktemp -d "${TMPDIR:-/tmp}/chorus-sanitizer.XXXXXX")
trap 'rm -rf "$reports"' EXIT
add_log_path() {  # VAR: appends log_path to the options in $VAR
  local current=${!1-}
  export "$1=${current:+$current:}log_path=$reports/$2"
}
add_log_path ASAN_OPTIONS asan
add_log_path UBSAN_OPTIONS ubsan
add_log_path LSAN_OPTIONS lsan
add_log_path TSAN_OPTIONS tsan

"$@"
rc=$?

found=0
for f in "$reports"/*; do
  [ -e "$f" ] || continue
  # A process that only wrote an empty file reported nothing.
  [ -s "$f" ] || continue
  found=1
  echo "=== sanitizer report ($(basename "$f")) ===" >&2
  cat "$f" >&2
done
if [ $found -ne 0 ]; then
  echo "test-wrapper: a sanitizer reported errors (test exit status $rc); failing the test" >&2
  exit 1
fi
exit $rc
