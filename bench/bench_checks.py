"""The bench tests' checks (bench/test_*.py), standard library only.

  from bench_checks import expect, failures
  expect(rows == 3, "three rows (got %d)" % rows)   # a failed check is
  ...                                               # printed and kept
  return 1 if failures else 0

One list for the whole process, so checks made by a module a test imports
(test_load.py uses test_compare_fusion.py's stand-ins) count too.
"""
import sys

failures = []


def expect(ok, what):
    """Records `what` as a failure, and prints it, unless `ok`."""
    if not ok:
        failures.append(what)
        print("FAILED: " + what, file=sys.stderr)
