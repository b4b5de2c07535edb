"""compare.py --fusion: chorus-bench fusion against mpi_allreduce_bench fusion
(the docstring of compare.py says what it runs and prints). Standard library only.
"""
import json
import os
import shlex
import sys
import time

from compare_util import (CONFIGS, TUNED_ENV, condense, finish, fmt_bytes, fmt_us,
                          median_or_none, parse_bytes, print_load, run_beside, run_one)


def probe_chorus_fusion(chorusrun, chorus_bench, transport, n, timeout, verbose):
    """Runs one tiny checked fusion step through chorus-bench; returns None
    when it printed fusion rows (objects with "mode"), else why not."""
    cmd = [chorusrun, "-np", str(n), "--timeout", str(timeout), chorus_bench, "fusion",
           "-t", transport, "-N", "2", "-b", "64", "-n", "1", "-w", "0", "-c", "1", "--json"]
    rows, _, error = run_one(cmd, timeout + 30, verbose, require_summary=False)
    if error:
        first, _, rest = error.partition("\n")
        return condense(rest) or first
    if not any("mode" in r and "step_us" in r for r in rows):
        return "it printed no fusion rows (JSON objects with \"mode\" and \"step_us\")"
    return None


FUSION_MODES = ("fused", "per_tensor", "single_buffer")


def run_fusion(args, nps, chorusrun, chorus_bench, mpi_bench, chorus_transport, tclass,
               fallback_note, chorus_missing, mpirun_base, load=None):
    """--fusion: chorus-bench fusion against mpi_allreduce_bench fusion."""
    if args.mix:
        shape = ["--mix", args.mix]
        what = "mix %s" % args.mix
    else:
        try:
            each = parse_bytes(args.bytes_each)
        except ValueError:
            print("compare.py: bad --bytes-each", file=sys.stderr)
            return 2
        if args.tensors < 1 or each < 4:
            print("compare.py: --tensors must be >= 1 and --bytes-each >= 4", file=sys.stderr)
            return 2
        shape = ["-N", str(args.tensors), "-b", str(each)]
        what = "%d tensors of %s" % (args.tensors, fmt_bytes(each))
    common = shape + ["-n", str(args.iters), "-w", str(args.warmup), "--iter-bytes",
                      args.iter_bytes, "-c", str(args.check), "--json"]

    chorus_note = None
    if chorus_missing:
        chorus_note = chorus_missing
    else:
        why = probe_chorus_fusion(chorusrun, chorus_bench, chorus_transport, min(nps),
                                  min(args.timeout, 120), args.verbose)
        if why is not None:
            chorus_note = "chorus-bench has no usable fusion mode (%s)" % why
    if chorus_note:
        chorus_note += ": Open MPI only, no fused mode and no fused ratios"
        print("compare.py: " + chorus_note, file=sys.stderr, flush=True)
    configs = [c for c in CONFIGS if not (c == "chorus" and chorus_note)
               and not (args.skip_tuned and c == "ompi-tuned")]

    def command(config, n):
        if config == "chorus":
            return [chorusrun, "-np", str(n), "--timeout", str(args.timeout)] + \
                shlex.split(args.chorusrun_args) + [chorus_bench, "fusion", "-t",
                                                    chorus_transport] + common + \
                shlex.split(args.chorus_args)
        extra = ["-x", TUNED_ENV] if config == "ompi-tuned" else []
        return mpirun_base + ["-np", str(n)] + tclass["mpi_args"] + extra + \
            shlex.split(args.mpirun_args) + [mpi_bench, "fusion"] + common

    failures, wrong_total = [], 0
    report = {"args": vars(args), "fusion": True, "chorus_transport": chorus_transport,
              "transport_fallback": fallback_note, "chorus_note": chorus_note, "results": {}}
    started = time.monotonic()
    for n in nps:
        runs = {c: [] for c in configs}  # config -> rows (one per mode and run)
        loads = []
        for r in range(args.runs):
            for config in configs:
                print("# np=%d run %d/%d %s fusion ..." % (n, r + 1, args.runs, config),
                      file=sys.stderr, flush=True)
                loads.append(os.getloadavg()[0])
                rows, _, error = run_beside(load, (n, config), run_one, command(config, n),
                                            args.timeout + 30, args.verbose,
                                            require_summary=False)
                loads.append(os.getloadavg()[0])
                if error:
                    failures.append("np=%d %s run %d: %s" % (n, config, r + 1, error))
                    print("compare.py: " + failures[-1], file=sys.stderr, flush=True)
                for row in rows or []:
                    if not isinstance(row.get("mode"), str) or \
                            not isinstance(row.get("step_us"), (int, float)):
                        failures.append("np=%d %s run %d: a row without mode/step_us: %s" %
                                        (n, config, r + 1, json.dumps(row)[:200]))
                        continue
                    row["config"], row["run"] = config, r + 1
                    runs[config].append(row)
                    if row.get("wrong"):
                        wrong_total += row["wrong"]
                        failures.append("np=%d %s run %d: %d wrong elements in mode %s" %
                                        (n, config, r + 1, row["wrong"], row["mode"]))
        modes = [m for m in FUSION_MODES if any(x["mode"] == m for c in configs
                                                 for x in runs[c])]
        modes += sorted({x["mode"] for c in configs for x in runs[c]} - set(modes))
        med = {c: {m: median_or_none([x["step_us"] for x in runs[c] if x["mode"] == m])
                   for m in modes} for c in configs}
        # Each run's mean step (both benches print mean_us): stalled steps
        # show there, not in the medians.
        mean = {c: {m: median_or_none([x["mean_us"] for x in runs[c] if x["mode"] == m and
                                       isinstance(x.get("mean_us"), (int, float))])
                    for m in modes} for c in configs}
        report["results"][str(n)] = {"runs": runs, "medians": med, "means": mean,
                                     "loadavg": loads}
        first = next((x for c in configs for x in runs[c]), {})

        print()
        print("## tensor fusion, %d ranks: %s (%s tensors, %s bytes per step), float32 sum; "
              "transport class %s (Chorus -t %s%s; Open MPI %s)" %
              (n, what, first.get("tensors", "?"), first.get("bytes", "?"),
               args.transport_class, chorus_transport,
               " FALLBACK, -t %s rejected" % tclass["chorus_transport"] if fallback_note else "",
               " ".join(tclass["mpi_args"])))
        print("## median step time in us (per run: the max over ranks of each rank's median "
              "step); medians of %d runs" % args.runs)
        fmt = "%13s " + " ".join(["%11s"] * len(configs))
        print(fmt % (("mode",) + tuple(configs)))
        for m in modes:
            print(fmt % ((m,) + tuple(fmt_us(med[c][m]) for c in configs)))
        if any(v is not None for c in configs for v in mean[c].values()):
            print("## mean step time in us (per run: the max over ranks of each rank's mean "
                  "step); medians of %d runs" % args.runs)
            print(fmt % (("mode",) + tuple(configs)))
            for m in modes:
                print(fmt % ((m,) + tuple(fmt_us(mean[c][m]) for c in configs)))

        def ratio(a, b):
            return "%.2f" % (a / b) if a and b else "-"
        fused = med.get("chorus", {}).get("fused")
        for base in ("per_tensor", "single_buffer") if fused else ():
            best_ompi = min([med[c][base] for c in configs
                             if c != "chorus" and med[c].get(base) is not None], default=None)
            print("## fused / %s: %s (Chorus's %s), %s (the better Open MPI %s)%s" %
                  (base, ratio(fused, med.get("chorus", {}).get(base)), base,
                   ratio(fused, best_ompi), base, "; below 1: fused is faster"))
        if not fused:
            print("## no fused ratios: no Chorus fused runs" +
                  (" (%s)" % chorus_note if chorus_note else ""))
        print("## 1-min load average: %.1f before the first run, %.1f..%.1f around the runs "
              "(%d CPUs, %d ranks)" % (loads[0], min(loads), max(loads), os.cpu_count() or 1, n))
        print_load(load, n, configs, report)
        sys.stdout.flush()

    print("\n# compare.py --fusion: %.0fs, %s" %
          (time.monotonic() - started, "all runs OK, every element right" if not failures
           else "%d problem(s):" % len(failures)))
    for note in (fallback_note, chorus_note):
        if note:
            print("# note: " + note)
    return finish(failures, report, wrong_total, args.json_out)
