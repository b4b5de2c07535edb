#!/usr/bin/env python3
"""Checks that no #include runs back up a floor of the layering.

Floors, lowest first (a file may include its own floor and those below):
  include/         the public API (C header, C++ header-only API)
  base/core        errors, config registry, logging, dtypes and kernels, deadlines
  base/bootstrap   stores, launcher environments
  base/topology    host identity and host map
  transports/      point-to-point transports
  collectives/     teams, the algorithm registry, algorithms, shared-memory domains
  lib/comm         the communicator (ordering, selection, split, point-to-point)
  lib/fusion       the fusion engine (above the communicator)
  lib/strategy     training strategies (mirrored) and optimizers (above fusion)
  lib/api          the C API
  tools/ bench/ examples/ python/   programs over the runtime
  tests/           anything
Usage: layers.py [ROOT]. Prints every upward include and exits 1 if any.
"""
import os
import re
import sys

FLOORS = [
    ("include/", 0),
    ("base/core/", 1),
    ("base/bootstrap/", 2),
    ("base/topology/", 3),
    ("transports/", 4),
    ("collectives/", 5),
    ("lib/comm/", 6),
    ("lib/fusion/", 7),
    ("lib/strategy/", 8),
    ("lib/", 9),
    ("tools/", 10), ("bench/", 10), ("examples/", 10), ("python/", 10),
    ("tests/", 11),
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def floor_of(path):
    for prefix, floor in FLOORS:
        if path.startswith(prefix):
            return floor
    return None


def main(root):
    bad = []
    checked = 0
    for top, _ in FLOORS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith((".c", ".cpp", ".h", ".hpp", ".inl", ".cu")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                mine = floor_of(path)
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        theirs = floor_of(target)
                        if theirs is None:  # same-folder or system-style include
                            continue
                        checked += 1
                        if theirs > mine:
                            bad.append(f"{path}:{number}: includes {target} (a floor above)")
    for line in bad:
        print(line)
    print(f"layers: {checked} includes checked, {len(bad)} run back up a floor")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
