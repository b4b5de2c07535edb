#!/usr/bin/env python3
"""Bus bandwidth against size, as a PNG, from benchmark JSON.

Reads any number of files, each either

  - JSON Lines from `chorus-bench ... -J` or `mpi_allreduce_bench ... --json`
    (one object per line; summary lines, blank lines and lines starting with
    '#' are skipped), or
  - the file `bench/compare.py --json-out FILE` writes (every run of every
    configuration: chorus, ompi, ompi-tuned, per rank count),

and draws one line per implementation and configuration (and per rank count
when there are several): busbw in GB/s against the size in bytes on a log2
axis (8B, 1K, 1M, ...). Rows of the same configuration and size from several
runs or files are reduced to their median, and the plot says how many runs.

  bench/plot.py chorus.jsonl ompi.jsonl -o busbw.png
  bench/plot.py compare.json -o busbw.png --title "allreduce over TCP"
  bench/plot.py a.jsonl b.jsonl --label before --label after -o ab.png

A row's implementation is its "impl" field, else its "config" field (set by
compare.py), else "ompi" when its "algo" is "mpi", "gloo" when it is "gloo"
(gloo_allreduce_bench.py) and "chorus" otherwise;
--label replaces it for the files in order (a file holding several, such
as a compare.py report, gets "LABEL chorus", "LABEL ompi", ...). Configurations are further told
apart by whichever of collective, type, redop, algo, inplace and blocking
differ between the lines, and by the rank count (nranks).

--summary prints what is plotted (series, medians per size, title) as one
JSON object on stdout, for tests and scripts.

matplotlib (Debian: python3-matplotlib; scripts/install-deps.sh installs it)
with the Agg backend: no display needed. When the Python running this cannot
import matplotlib but /usr/bin/python3 can (e.g. a pyenv python3 first on
PATH), the script re-runs itself with /usr/bin/python3.

Exit status: 0 on success, 2 on bad usage or malformed input (the message
names the file and line), 3 when matplotlib cannot be imported
(--check-deps: 0 when it can, 3 when not; nothing else is done).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

SYSTEM_PYTHON = "/usr/bin/python3"
REEXEC_GUARD = "CHORUS_PLOT_REEXEC"
# Fields that tell configurations of one implementation apart, in label order.
CONFIG_FIELDS = ("collective", "type", "redop", "algo", "inplace", "blocking")
METRICS = {
    "busbw": ("busbw_gbps", "bus bandwidth (GB/s)"),
    "algbw": ("algbw_gbps", "algorithm bandwidth (GB/s)"),
    "time": ("time_us", "time per call (us)"),
}


class InputError(Exception):
    """Malformed input; the message names the file (and line)."""


def fmt_size(n):
    """8 -> '8B', 1024 -> '1K', 3 MiB -> '3M', 1536 -> '1.5K'."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return ("%d%s" % (v, unit)) if v == int(v) else ("%.3g%s" % (v, unit))
    return "%dB" % n


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_row(row, where, metric_field):
    """Raises InputError unless row is a benchmark row plot.py can use."""
    if not isinstance(row, dict):
        raise InputError("%s: expected a JSON object, got %s" % (where, type(row).__name__))
    if "size" not in row and "mode" in row:
        raise InputError("%s: a fusion row (\"mode\": %r): plot.py plots size sweeps "
                         "(chorus-bench/mpi_allreduce_bench -J), not fusion steps" %
                         (where, row["mode"]))
    for field in ("size", metric_field):
        if field not in row:
            raise InputError("%s: row has no \"%s\" field: %s" %
                             (where, field, json.dumps(row)[:200]))
    if not is_number(row["size"]) or row["size"] <= 0 or row["size"] != int(row["size"]):
        raise InputError("%s: \"size\" is not a positive whole number: %r" % (where, row["size"]))
    if not is_number(row[metric_field]) or row[metric_field] < 0:
        raise InputError("%s: \"%s\" is not a non-negative number: %r" %
                         (where, metric_field, row[metric_field]))


def read_compare_report(doc, path, metric_field):
    """Rows (with "config" set) and meta from compare.py's --json-out file."""
    if doc.get("fusion"):
        raise InputError("%s: a compare.py --fusion report: plot.py plots size sweeps" % path)
    results = doc.get("results")
    if not isinstance(results, dict):
        raise InputError("%s: compare.py report without a \"results\" object" % path)
    rows = []
    for n, per_np in results.items():
        runs = per_np.get("runs") if isinstance(per_np, dict) else None
        if not isinstance(runs, dict):
            raise InputError("%s: results[%s] has no \"runs\" object" % (path, n))
        for config, by_size in runs.items():
            if not isinstance(by_size, dict):
                raise InputError("%s: results[%s].runs[%s] is not an object" % (path, n, config))
            for size, lst in by_size.items():
                for i, row in enumerate(lst if isinstance(lst, list) else [lst]):
                    where = "%s: results[%s].runs[%s][%s][%d]" % (path, n, config, size, i)
                    check_row(row, where, metric_field)
                    row = dict(row)
                    row.setdefault("config", config)
                    row.setdefault("nranks", int(n) if str(n).isdigit() else None)
                    rows.append(row)
    args = doc.get("args") or {}
    transport = doc.get("chorus_transport")
    meta = {"transport_class": args.get("transport_class"), "chorus_transport": transport}
    return rows, meta


def read_file(path, metric_field):
    """Returns (rows, meta) of one input file."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        raise InputError("%s: cannot read: %s" % (path, e.strerror or e))
    # A single JSON document (compare.py --json-out) first.
    stripped = text.strip()
    if stripped.startswith("{") and "\n" in stripped:
        try:
            doc = json.loads(stripped)
        except json.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and "results" in doc:
            return read_compare_report(doc, path, metric_field)
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        where = "%s:%d" % (path, number)
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError("%s: not JSON (%s): %s" % (where, e.msg, line[:120]))
        if isinstance(obj, dict) and obj.get("summary"):
            continue
        check_row(obj, where, metric_field)
        rows.append(obj)
    return rows, {}


def impl_of(row):
    if row.get("impl"):
        return str(row["impl"])
    if row.get("config"):
        return str(row["config"])
    return {"mpi": "ompi", "gloo": "gloo"}.get(row.get("algo"), "chorus")


def build_series(rows, metric_field):
    """{key: {size: [values]}}; key = (impl, nranks, config field values...)."""
    series = {}
    for row in rows:
        key = (row["_impl"], row.get("nranks")) + tuple(row.get(f) for f in CONFIG_FIELDS)
        series.setdefault(key, {}).setdefault(int(row["size"]), []).append(row[metric_field])
    return series


def series_labels(keys):
    """A label per key: the implementation, the fields that differ between
    keys of the same implementation (chorus's algo "auto" against Open MPI's
    "mpi" is no difference worth a label), and np=N when rank counts differ."""
    several_np = len({k[1] for k in keys}) > 1
    labels = {}
    for k in keys:
        same_impl = [o for o in keys if o[0] == k[0]]
        varying = [i for i in range(len(CONFIG_FIELDS))
                   if len({o[2 + i] for o in same_impl}) > 1]
        parts = [k[0]]
        for i in varying:
            v = k[2 + i]
            if v is not None:
                parts.append("%s=%s" % (CONFIG_FIELDS[i], v))
        if several_np and k[1] is not None:
            parts.append("np=%s" % k[1])
        labels[k] = " ".join(parts)
    return labels


def title_of(rows, metas, transport_opt):
    colls = sorted({str(r.get("collective")) for r in rows if r.get("collective")})
    types = sorted({str(r.get("type")) for r in rows if r.get("type")})
    redops = sorted({str(r.get("redop")) for r in rows
                     if r.get("redop") and r.get("redop") != "none"})
    nps = sorted({r.get("nranks") for r in rows if r.get("nranks") is not None})
    parts = ["/".join(colls) or "collective ?"]
    if types or redops:
        parts[0] += " " + " ".join(["/".join(types)] + (["/".join(redops)] if redops else []))
    transport = transport_opt
    if not transport:
        found = sorted({str(r["transport"]) for r in rows if r.get("transport")})
        classes = sorted({m["transport_class"] for m in metas if m.get("transport_class")})
        chorus_t = sorted({m["chorus_transport"] for m in metas if m.get("chorus_transport")})
        if found:
            transport = "/".join(found)
        elif classes:
            transport = "class " + "/".join(classes)
            if chorus_t and chorus_t != classes:
                transport += " (Chorus -t %s)" % "/".join(chorus_t)
    if transport:
        parts.append("transport " + transport)
    if nps:
        parts.append("np " + ",".join(str(n) for n in nps))
    return ", ".join(parts)


def ensure_matplotlib():
    """Imports matplotlib with Agg, re-running under /usr/bin/python3 if only
    it has matplotlib. Returns the pyplot module, or None (caller exits 3)."""
    try:
        import matplotlib
    except ImportError:
        here = os.path.realpath(sys.executable or "")
        if (os.environ.get(REEXEC_GUARD) != "1" and os.access(SYSTEM_PYTHON, os.X_OK)
                and os.path.realpath(SYSTEM_PYTHON) != here
                and subprocess.run([SYSTEM_PYTHON, "-c", "import matplotlib"],
                                   stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL).returncode == 0):
            env = dict(os.environ, **{REEXEC_GUARD: "1"})
            sys.stdout.flush()
            sys.stderr.flush()
            os.execve(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:],
                      env)
        print("plot.py: matplotlib cannot be imported by %s%s (Debian: apt-get install "
              "python3-matplotlib, which scripts/install-deps.sh does)" %
              (sys.executable, "" if os.environ.get(REEXEC_GUARD) else
               " nor by " + SYSTEM_PYTHON), file=sys.stderr)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def size_ticks(sizes, max_ticks=14):
    """The sizes themselves when they are few powers of two, else powers of two
    from the smallest to the largest (rounded out), thinned to at most
    max_ticks."""
    if len(sizes) <= max_ticks and all(s & (s - 1) == 0 for s in sizes):
        return list(sizes)
    lo, hi = sizes[0], sizes[-1]
    e0, e1 = int(math.floor(math.log2(lo))), int(math.ceil(math.log2(hi)))
    step = 1
    while (e1 - e0) // step + 1 > max_ticks:
        step += 1
    # Keep multiples of step so that 1K, 1M, 1G stay on the axis when possible.
    first = e0 + (-e0) % step if step > 1 else e0
    return [1 << e for e in range(first, e1 + 1, step)]


def main():
    ap = argparse.ArgumentParser(
        description="Plot busbw against size from chorus-bench -J / mpi_allreduce_bench "
                    "--json output or compare.py --json-out files.")
    ap.add_argument("inputs", nargs="*", help="JSON Lines files or compare.py --json-out files")
    ap.add_argument("-o", "--output", default="busbw.png", help="PNG to write")
    ap.add_argument("--label", action="append", default=[],
                    help="implementation name for the inputs in order (repeat per file)")
    ap.add_argument("--title", help="title (default: collective, type, transport, np)")
    ap.add_argument("--transport", help="transport named in the title (default: from the input)")
    ap.add_argument("--metric", choices=sorted(METRICS), default="busbw",
                    help="what the y axis shows (time: log scale)")
    ap.add_argument("--logy", action="store_true", help="log scale on the y axis")
    ap.add_argument("--dpi", type=int, default=120, help="resolution of the PNG")
    ap.add_argument("--summary", action="store_true",
                    help="print the plotted series and medians as JSON on stdout")
    ap.add_argument("--check-deps", action="store_true",
                    help="exit 0 when matplotlib can be imported, 3 when not")
    args = ap.parse_args()

    if args.check_deps:
        return 0 if ensure_matplotlib() else 3
    if not args.inputs:
        ap.print_usage(sys.stderr)
        print("plot.py: no input files", file=sys.stderr)
        return 2
    if len(args.label) > len(args.inputs):
        print("plot.py: %d --label for %d inputs" % (len(args.label), len(args.inputs)),
              file=sys.stderr)
        return 2
    metric_field, ylabel = METRICS[args.metric]

    rows, metas = [], []
    try:
        for i, path in enumerate(args.inputs):
            file_rows, meta = read_file(path, metric_field)
            if not file_rows:
                raise InputError("%s: no benchmark rows (objects with \"size\" and \"%s\")" %
                                 (path, metric_field))
            # --label names the file's rows; a file of several implementations
            # (a compare.py report) keeps them apart: "LABEL chorus", "LABEL ompi".
            impls = {impl_of(row) for row in file_rows}
            for row in file_rows:
                row["_impl"] = impl_of(row)
                if i < len(args.label):
                    row["_impl"] = args.label[i] + (" " + row["_impl"] if len(impls) > 1 else "")
            rows += file_rows
            metas.append(meta)
    except InputError as e:
        print("plot.py: %s" % e, file=sys.stderr)
        return 2

    series = build_series(rows, metric_field)
    labels = series_labels(list(series))
    order = sorted(series, key=lambda k: (labels[k] != "chorus", k[1] or 0, labels[k]))
    medians = {k: {s: statistics.median(v) for s, v in series[k].items()} for k in order}
    runs = {k: max(len(v) for v in series[k].values()) for k in order}
    title = args.title or title_of(rows, metas, args.transport)
    # Before any output: this may re-run the script under /usr/bin/python3.
    plt = ensure_matplotlib()
    if plt is None:
        return 3
    if args.summary:
        print(json.dumps({
            "title": title, "metric": metric_field, "output": args.output,
            "series": [{"label": labels[k], "nranks": k[1], "runs": runs[k],
                        "points": [[s, medians[k][s], len(series[k][s])]
                                   for s in sorted(medians[k])]} for k in order],
        }), flush=True)

    sizes = sorted({s for k in order for s in medians[k]})
    fig, ax = plt.subplots(figsize=(9, 5.5))
    # One colour and marker per configuration, one line style per rank count.
    markers, styles = "osD^vx*+<>", ("-", "--", ":", "-.")
    configs = []
    for k in order:
        if k[:1] + k[2:] not in configs:
            configs.append(k[:1] + k[2:])
    nps = sorted({k[1] for k in order}, key=lambda n: (n is None, n or 0))
    colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for k in order:
        c, j = configs.index(k[:1] + k[2:]), nps.index(k[1])
        xs = sorted(medians[k])
        ax.plot(xs, [medians[k][x] for x in xs], marker=markers[c % len(markers)],
                color=colors[c % len(colors)], linestyle=styles[j % len(styles)],
                markersize=4, linewidth=1.5,
                label=labels[k] + (" (median of %d runs)" % runs[k] if runs[k] > 1 else ""))
    ax.set_xscale("log", base=2)
    ticks = size_ticks(sizes)
    ax.set_xticks(ticks)
    ax.set_xticklabels([fmt_size(t) for t in ticks])
    ax.minorticks_off()
    if args.logy or args.metric == "time":
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel("size (bytes per rank)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.35)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=args.dpi, format="png")
    except OSError as e:
        print("plot.py: cannot write %s: %s" % (args.output, e.strerror or e), file=sys.stderr)
        return 2
    plt.close(fig)
    print("plot.py: wrote %s (%d series, %d sizes)" % (args.output, len(order), len(sizes)),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
