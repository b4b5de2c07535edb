#!/usr/bin/env python3
"""bench-plot: bench/plot.py on generated benchmark JSON.

- chorus-bench -J style rows from two runs plus an mpi_allreduce_bench --json
  file: the PNG is valid (signature, IHDR of the expected size, every chunk's
  CRC, IEND) and not trivial; --summary reports one series per implementation
  with the median of the two runs at every size, and the title names the
  collective, type, transport and rank count;
- a compare.py --json-out report with two rank counts: one series per
  configuration and rank count, labelled np=N;
- malformed input (a line that is not JSON, a row without busbw_gbps, a
  negative busbw, a file without rows, a missing file, a fusion row) fails
  with exit status 2, a message naming the file (and line), and no PNG.

  test_plot.py PLOT_PY

Exit 77 (meson's skip) only when matplotlib cannot be imported (plot.py
--check-deps says 3); plot.py itself falls back to /usr/bin/python3.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

from bench_checks import expect, failures  # next to this script


def row(impl, size, busbw, nranks=2, run=0):
    r = {"collective": "allreduce", "nranks": nranks, "size": size, "count": max(1, size // 4),
         "type": "float32", "redop": "sum", "algo": "auto" if impl == "chorus" else "mpi",
         "root": -1, "inplace": 0, "warmup": 1, "iters": 5, "time_us": 10.0 + size / 1e3,
         "algbw_gbps": busbw, "busbw_gbps": busbw, "wrong": 0}
    if impl == "chorus":
        r.update({"blocking": 1, "limit_gbps": None, "pct_limit": None})
    return r


SIZES = [8 << (2 * i) for i in range(11)]  # 8 B .. 8 MiB, factor 4


def chorus_busbw(size, run):
    return round(0.001 * (SIZES.index(size) + 1) + run, 6)  # run 0, 1, 2: median is run 1


def ompi_busbw(size):
    return round(0.0005 * (SIZES.index(size) + 1), 6)


def png_check(path, what):
    """Structure of a PNG: signature, chunks with right CRCs, IHDR first,
    IEND last. Returns (width, height) or None."""
    try:
        data = open(path, "rb").read()
    except OSError:
        expect(False, "%s: %s was written" % (what, path))
        return None
    expect(len(data) > 10000, "%s: PNG of more than 10 kB (got %d bytes)" % (what, len(data)))
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        expect(False, "%s: PNG signature" % what)
        return None
    pos, chunks, size = 8, [], None
    while pos + 12 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        crc = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]
        expect(zlib.crc32(kind + body) & 0xffffffff == crc, "%s: CRC of chunk %r" % (what, kind))
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        chunks.append(kind)
        pos += 12 + length
    expect(chunks[:1] == [b"IHDR"] and chunks[-1:] == [b"IEND"] and pos == len(data),
           "%s: IHDR first, IEND last, nothing after" % what)
    expect(b"IDAT" in chunks, "%s: image data" % what)
    return size


def run(plot, args):
    proc = subprocess.run([sys.executable, plot] + args, capture_output=True, text=True,
                          timeout=120)
    return proc


def main():
    if len(sys.argv) != 2:
        print("usage: test_plot.py PLOT_PY", file=sys.stderr)
        return 2
    plot = sys.argv[1]
    deps = run(plot, ["--check-deps"])
    if deps.returncode == 3:
        print("matplotlib cannot be imported: skipped\n" + deps.stderr)
        return 77
    expect(deps.returncode == 0, "--check-deps: exit 0 or 3 (got %d: %s)" %
           (deps.returncode, deps.stderr))

    with tempfile.TemporaryDirectory(prefix="chorus-plot-") as tmp:
        chorus = os.path.join(tmp, "chorus.jsonl")
        ompi = os.path.join(tmp, "ompi.jsonl")
        with open(chorus, "w") as fh:
            for r in (2, 0, 1):  # three runs, out of order
                for s in SIZES:
                    fh.write(json.dumps(row("chorus", s, chorus_busbw(s, r))) + "\n")
                fh.write('{"summary": true, "collective": "allreduce", "nranks": 2, '
                         '"wrong": 0, "avg_busbw_gbps": 1.0}\n')
        with open(ompi, "w") as fh:
            for s in SIZES:
                fh.write(json.dumps(row("ompi", s, ompi_busbw(s))) + "\n")
            fh.write('{"summary": true, "wrong": 0, "avg_busbw_gbps": 0.1}\n')

        # 1. JSON Lines from both benchmarks.
        png = os.path.join(tmp, "busbw.png")
        proc = run(plot, [chorus, ompi, "-o", png, "--transport", "tcp", "--summary"])
        expect(proc.returncode == 0, "jsonl: exit 0 (got %d: %s)" % (proc.returncode,
                                                                     proc.stderr))
        if proc.returncode == 0:
            summary = json.loads(proc.stdout)
            expect(summary["title"] == "allreduce float32 sum, transport tcp, np 2",
                   "jsonl: title (got %r)" % summary["title"])
            labels = [x["label"] for x in summary["series"]]
            expect(labels == ["chorus", "ompi"], "jsonl: series chorus, ompi (got %s)" % labels)
            if labels == ["chorus", "ompi"]:
                c, o = summary["series"]
                expect([p[0] for p in c["points"]] == SIZES, "jsonl: chorus has every size")
                expect(all(abs(p[1] - chorus_busbw(p[0], 1)) < 1e-9 and p[2] == 3
                           for p in c["points"]), "jsonl: chorus points are medians of 3 runs")
                expect(c["runs"] == 3 and o["runs"] == 1, "jsonl: runs per series 3 and 1")
                expect(all(abs(p[1] - ompi_busbw(p[0])) < 1e-9 for p in o["points"]),
                       "jsonl: ompi points are its values")
            dims = png_check(png, "jsonl")
            expect(dims is not None and dims[0] >= 800 and dims[1] >= 500,
                   "jsonl: a 9x5.5 in figure at 120 dpi (got %s)" % (dims,))

        # 2. A compare.py --json-out report, two rank counts, with --label ignored
        #    for config names: configs come from the report.
        report = {"args": {"transport_class": "shm"}, "chorus_transport": "shm",
                  "transport_fallback": None, "results": {}}
        for n in (2, 4):
            runs = {}
            for config in ("chorus", "ompi", "ompi-tuned"):
                impl = "chorus" if config == "chorus" else "ompi"
                runs[config] = {str(s): [row(impl, s, 1.0 + n + SIZES.index(s), nranks=n)
                                         for _ in range(2)] for s in SIZES[:6]}
            report["results"][str(n)] = {"runs": runs, "medians": {}, "loadavg": [0.1]}
        cmp_json = os.path.join(tmp, "compare.json")
        with open(cmp_json, "w") as fh:
            json.dump(report, fh, indent=1)
        png2 = os.path.join(tmp, "compare.png")
        proc = run(plot, [cmp_json, "-o", png2, "--summary"])
        expect(proc.returncode == 0, "compare: exit 0 (got %d: %s)" % (proc.returncode,
                                                                      proc.stderr))
        if proc.returncode == 0:
            summary = json.loads(proc.stdout)
            labels = sorted(x["label"] for x in summary["series"])
            want = sorted("%s np=%d" % (c, n) for c in ("chorus", "ompi", "ompi-tuned")
                          for n in (2, 4))
            expect(labels == want, "compare: series per config and np (got %s)" % labels)
            expect(summary["title"] == "allreduce float32 sum, transport class shm, np 2,4",
                   "compare: title (got %r)" % summary["title"])
            expect(all(len(x["points"]) == 6 and all(p[2] == 2 for p in x["points"])
                       for x in summary["series"]), "compare: 6 sizes of 2 runs per series")
            png_check(png2, "compare")

        # --label: one name per file; a report's configurations stay apart.
        proc = run(plot, [chorus, cmp_json, "--label", "new", "--label", "old", "-o",
                          os.path.join(tmp, "labels.png"), "--summary"])
        expect(proc.returncode == 0, "labels: exit 0 (got %d: %s)" % (proc.returncode,
                                                                     proc.stderr))
        if proc.returncode == 0:
            labels = sorted(x["label"] for x in json.loads(proc.stdout)["series"])
            want = sorted(["new np=2"] + ["old %s np=%d" % (c, n)
                                          for c in ("chorus", "ompi", "ompi-tuned")
                                          for n in (2, 4)])
            expect(labels == want, "labels: %s (got %s)" % (want, labels))

        # 3. Malformed inputs.
        bad = {
            "notjson.jsonl": (json.dumps(row("chorus", 8, 1.0)) + "\n{oops\n", ":2: not JSON"),
            "nobusbw.jsonl": ('{"size": 8, "time_us": 1.0}\n', 'no "busbw_gbps"'),
            "negative.jsonl": (json.dumps(dict(row("ompi", 8, 1.0), busbw_gbps=-1)) + "\n",
                               "non-negative"),
            "empty.jsonl": ('{"summary": true, "wrong": 0}\n', "no benchmark rows"),
            "fusion.jsonl": ('{"impl": "ompi", "mode": "per_tensor", "step_us": 1.0}\n',
                             "fusion row"),
        }
        for name, (text, message) in bad.items():
            path = os.path.join(tmp, name)
            with open(path, "w") as fh:
                fh.write(text)
            out = os.path.join(tmp, name + ".png")
            proc = run(plot, [chorus, path, "-o", out])
            expect(proc.returncode == 2, "%s: exit 2 (got %d)" % (name, proc.returncode))
            expect(name in proc.stderr and message in proc.stderr,
                   "%s: the message names the file and says %r (got %r)" %
                   (name, message, proc.stderr.strip()))
            expect(not os.path.exists(out), "%s: no PNG written" % name)
        proc = run(plot, [os.path.join(tmp, "missing.jsonl"), "-o", os.path.join(tmp, "m.png")])
        expect(proc.returncode == 2 and "missing.jsonl" in proc.stderr,
               "a missing file: exit 2 naming it (got %d: %r)" % (proc.returncode, proc.stderr))

    print("test_plot: %s" % ("OK" if not failures else "%d failure(s)" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
