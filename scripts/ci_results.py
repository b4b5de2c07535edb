#!/usr/bin/env python3
"""Helpers of scripts/test.sh that read meson's machine-readable output.

  ci_results.py options BUILD_DIR KEY=VALUE...
      Fails (exit 1) unless every build option KEY has VALUE in BUILD_DIR
      (meson introspect): a stale build directory configured differently must
      never be reused as it is.

  ci_results.py summary BUILD_DIR [--expect-skip NAME]... [--only NAME]...
      Reads BUILD_DIR/meson-logs/testlog*.json (the newest) and the list of tests the build
      defines (meson test --list). Prints every test that did not pass, every
      skip with its reason, and every sanitizer report found in a test's
      output; then a last line "PASSED FAILED SKIPPED" (three integers) for
      the caller to add up. Counted as failed: FAIL, TIMEOUT, ERROR,
      UNEXPECTEDPASS, INTERRUPT, any other non-pass result, a passing test
      whose output holds a sanitizer report, a skip not named with
      --expect-skip, and every test the build defines that has no result.
      With --only (a suite that runs a chosen subset on purpose), only the
      tests named with --only must have a result; a name --only gives that
      the build does not define is itself a failure.

  ci_results.py targets BUILD_DIR NAME...
      Prints (one a line) the ninja targets that the named tests need: their
      executables and declared depends. Fails (exit 1) when the build defines
      no test of a given name.

NAME is a test's name with or without its project ("chorus:tcp" or "tcp").
"""
import glob
import json
import os
import re
import shlex
import subprocess
import sys

PASS = {"OK", "EXPECTEDFAIL"}
SKIP = {"SKIP"}
SANITIZER = re.compile(r"(ERROR: AddressSanitizer|ERROR: LeakSanitizer|AddressSanitizer:|"
                       r"LeakSanitizer:|ThreadSanitizer:|runtime error:)")


def introspect(build_dir, what):
    out = subprocess.run(["meson", "introspect", what, build_dir], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def check_options(build_dir, pairs):
    options = {o["name"]: o["value"] for o in introspect(build_dir, "--buildoptions")}
    bad = []
    for pair in pairs:
        key, _, want = pair.partition("=")
        have = options.get(key)
        if isinstance(have, list) and key.endswith("_args"):  # compiler flags, as a shell splits them
            have_text, want = " ".join(have), " ".join(shlex.split(want))
        elif isinstance(have, list):  # b_sanitize is a list in newer meson; [] is "none"
            have_text = ",".join(str(x) for x in have) or "none"
        elif isinstance(have, bool):
            have_text = "true" if have else "false"
        else:
            have_text = str(have)
        if have_text != want:
            bad.append(f"{key}: configured {have_text!r}, wanted {want!r}")
    for line in bad:
        print(f"ci_results: {build_dir}: {line}")
    return 1 if bad else 0


def normalise(name):
    """'project / test' (some meson versions) and 'project:test' name one test."""
    return name.replace(" / ", ":").strip()


def named(name, wanted):
    """Whether test NAME is one of WANTED, each "project:test" or "test"."""
    return name.split(":", 1)[-1] in {w.split(":", 1)[-1] for w in wanted}


def defined_tests(build_dir):
    out = subprocess.run(["meson", "test", "-C", build_dir, "--list"], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        line = line.strip()
        if line:
            names.add(normalise(line))
    return names


def last_lines(text, n=5):
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-n:]


def summary(build_dir, expected_skips, only=None):
    # meson test names the log after its --wrapper (testlog-test-wrapper.sh.json):
    # the newest testlog*.json is this run's (test.sh removes older ones first).
    logs = glob.glob(os.path.join(build_dir, "meson-logs", "testlog*.json"))
    log = max(logs, key=os.path.getmtime) if logs else os.path.join(build_dir, "meson-logs",
                                                                       "testlog.json")
    results = {}
    if os.path.exists(log):
        with open(log, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    print(f"ci_results: unreadable line in {log}: {line[:120]}")
                    results[f"<unreadable line {len(results)}>"] = ("ERROR", "")
                    continue
                output = (entry.get("stdout") or "") + "\n" + (entry.get("stderr") or "")
                results[normalise(entry["name"])] = (entry.get("result", "ERROR"), output)
    else:
        print(f"ci_results: {log} does not exist: meson test did not run")

    try:
        defined = defined_tests(build_dir)
    except (subprocess.CalledProcessError, OSError) as e:
        print(f"ci_results: cannot list the build's tests: {e}")
        defined = set()
    unknown = []
    if only and defined:
        unknown = sorted(n for n in only if not any(named(d, {n}) for d in defined))
        defined = {d for d in defined if named(d, only)}

    passed = failed = skipped = 0
    for name, (result, output) in sorted(results.items()):
        reports = [l for l in output.splitlines() if SANITIZER.search(l)]
        if reports:
            failed += 1
            print(f"FAILED {name}: sanitizer report in its output ({result}):")
            for l in reports[:10]:
                print(f"    {l}")
        elif result in PASS:
            passed += 1
        elif result in SKIP:
            skipped += 1
            why = " | ".join(last_lines(output, 2)) or "(no output)"
            if name in expected_skips:
                print(f"skipped {name} (expected here): {why}")
            else:
                failed += 1
                print(f"FAILED {name}: UNEXPECTED SKIP: {why}")
        else:
            failed += 1
            print(f"FAILED {name}: {result}")
            for l in last_lines(output, 8):
                print(f"    {l}")
    if not defined:
        failed += 1
        print("FAILED: the build defines no tests (or they could not be listed)")
    for name in unknown:
        failed += 1
        print(f"FAILED {name}: named with --only but the build defines no such test")
    missing = sorted(defined - set(results))
    for name in missing:
        failed += 1
        print(f"FAILED {name}: defined by the build but has no result (not run)")
    print(f"{passed} {failed} {skipped}")
    return 0


def print_targets(build_dir, names):
    tests = introspect(build_dir, "--tests")
    files = {t["id"]: t["filename"] for t in introspect(build_dir, "--targets")}
    root = os.path.realpath(build_dir)
    wanted = set()
    bad = 0
    for name in names:
        matches = [t for t in tests if named(normalise(t["name"]), {name})]
        if not matches:
            print(f"ci_results: {build_dir} defines no test {name}", file=sys.stderr)
            bad = 1
        for t in matches:
            paths = [p for dep in t.get("depends", []) for p in files.get(dep, [])]
            paths += t["cmd"][:1]
            for path in paths:
                rel = os.path.relpath(os.path.realpath(path), root)
                if not rel.startswith(".."):  # built here, not a system program
                    wanted.add(rel)
    for target in sorted(wanted):
        print(target)
    return bad


def main(argv):
    if len(argv) >= 2 and argv[0] == "options":
        return check_options(argv[1], argv[2:])
    if len(argv) >= 2 and argv[0] == "summary":
        expected = set()
        only = set()
        rest = argv[2:]
        while rest:
            if rest[0] == "--expect-skip" and len(rest) > 1:
                expected.add(rest[1])
                rest = rest[2:]
            elif rest[0] == "--only" and len(rest) > 1:
                only.add(rest[1])
                rest = rest[2:]
            else:
                print(f"ci_results: unknown argument {rest[0]}")
                return 2
        return summary(argv[1], expected, only or None)
    if len(argv) >= 3 and argv[0] == "targets":
        return print_targets(argv[1], argv[2:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
