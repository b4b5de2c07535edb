#!/usr/bin/env python3
"""Test accuracy against wall time, one line per run, from the --log-json
files of train.py and train_tf.py (one JSON object per epoch and line).

    python3 plot.py -o accuracy.png runs/*.json
"""
import argparse
import json
import sys


def read_run(path):
    records = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}:{number}: not JSON ({e})")
    if not records:
        sys.exit(f"{path}: no epoch records")
    return records


def label(record):
    """mode[/backend][+fp16], N ranks."""
    text = record["mode"]
    if record.get("backend"):
        text += "/" + record["backend"]
    if record.get("fp16_hook"):
        text += "+fp16"
    ranks = record["ranks"]
    return f"{text}, {ranks} rank{'s' if ranks != 1 else ''}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("logs", nargs="+", help="--log-json files")
    p.add_argument("-o", "--output", default="accuracy.png", help="PNG to write")
    p.add_argument("--title", default="Fashion-MNIST: test accuracy against wall time")
    args = p.parse_args(argv)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    # 20 distinct colours and 4 marker shapes: no two of up to 20 runs look alike.
    colours = plt.cm.tab20.colors
    for i, path in enumerate(args.logs):
        records = read_run(path)
        # The origin is the start of training (wall_s counts from there).
        ax.plot([r["wall_s"] for r in records], [100 * r["test_accuracy"] for r in records],
                marker="osD^"[i % 4], color=colours[i % len(colours)], label=label(records[0]))
    ax.set_xlabel("wall time since the start of training (s)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(args.title)
    ax.set_xlim(left=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
