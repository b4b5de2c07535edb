#!/usr/bin/env bash
# Trains examples/train's Fashion-MNIST CNN every way and compares them:
# single process; DDP over the chorus backend and over gloo; chorus.Mirrored
# (each on 2 and 4 ranks); TensorFlow's MultiWorkerMirroredStrategy (RING) on
# 2 workers when TensorFlow is importable. Writes each run's log
# (<name>.json, JSON lines, and <name>.out), accuracy.png (test accuracy
# against wall time) into OUTDIR, and prints a table.
#
#   scripts/train-comparison.sh OUTDIR [--epochs N] [--fraction F] [--ranks "2 4"] [-- TRAIN ARGS...]
#
# --epochs (default 3) and --fraction (of each epoch, default 1) go to every
# run; arguments after -- go to train.py and train_tf.py (e.g. --optimizer
# momentum). Environment: BUILD_DIR (default build-release; set up and built
# like scripts/bench.sh unless SKIP_BUILD=1), RUN_TIMEOUT (seconds per run,
# default 3600), TF_PYTHON (the interpreter with TensorFlow, default python3;
# INSTALL_TF=1 scripts/install-deps.sh installs it). See examples/train/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
out=$1; shift
epochs=3
fraction=1
ranks_list="2 4"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs=$2; shift 2 ;;
    --fraction) fraction=$2; shift 2 ;;
    --ranks) ranks_list=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "train-comparison.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

build_dir=${BUILD_DIR:-build-release}
run_timeout=${RUN_TIMEOUT:-3600}
tf_python=${TF_PYTHON:-python3}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  ./scripts/install-deps.sh
  [ -f "$build_dir/build.ninja" ] || meson setup "$build_dir" -Dbuildtype=release
  ninja -C "$build_dir"
fi
chorusrun="$build_dir/tools/chorusrun"
[ -x "$chorusrun" ] || { echo "train-comparison.sh: no $chorusrun (build first, or unset SKIP_BUILD)" >&2; exit 1; }
build_abs=$(cd "$build_dir" && pwd)
export PYTHONPATH="$build_abs/python${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$out"
common=(--epochs "$epochs" --fraction "$fraction" "${extra[@]+"${extra[@]}"}")
train=examples/train/train.py
failed=()

run() {  # name, command...: the log to $out/name.json, the output to $out/name.out
  local name=$1; shift
  echo "=== $name: $*"
  if timeout "$run_timeout" "$@" --log-json "$out/$name.json" "${common[@]}" 2>&1 | tee "$out/$name.out"; then
    :
  else
    echo "=== $name FAILED" >&2
    failed+=("$name")
  fi
}

run single python3 "$train" --mode single
for np in $ranks_list; do
  for backend in chorus gloo; do
    run "ddp-$backend-$np" "$chorusrun" -np "$np" python3 "$train" --mode ddp --backend "$backend"
  done
  run "mirrored-$np" "$chorusrun" -np "$np" python3 "$train" --mode mirrored
done
# Parameter servers: 1 server and 2 or 3 workers (the chief among them).
for workers in 2 3; do
  for mode in async bounded; do
    run "ps-$mode-$workers" "$chorusrun" -np $((workers + 1)) --ps 1 python3 "$train" --mode ps \
      --ps-mode "$mode" --max-staleness 1
  done
done
if "$tf_python" -c "import tensorflow" 2>/dev/null; then
  # Every worker gets its own TF_CONFIG task and free port from chorusrun.
  run tf-mwms-2 "$chorusrun" -np 2 --tf-config "$tf_python" examples/train/train_tf.py
else
  echo "=== tf-mwms-2: skipped ($tf_python cannot import tensorflow; INSTALL_TF=1 scripts/install-deps.sh)"
fi

logs=()
for f in "$out"/*.json; do [ -s "$f" ] && logs+=("$f"); done
python3 - "${logs[@]}" <<'EOF'
import json, sys
rows = []
for path in sys.argv[1:]:
    records = [json.loads(line) for line in open(path) if line.strip()]
    if not records:
        continue
    last = records[-1]
    name = last["mode"] + (f"/{last['backend']}" if last.get("backend") else "") + ("+fp16" if last.get("fp16_hook") else "")
    epoch_s = sum(r["epoch_s"] for r in records) / len(records)
    rate = sum(r["images_per_s"] for r in records) / len(records)
    rows.append((name, last["ranks"], epoch_s, rate, len(records), 100 * last["test_accuracy"], last["wall_s"]))
print(f"{'mode':20} {'ranks':>5} {'s/epoch':>8} {'images/s':>9} {'epochs':>6} {'accuracy %':>10} {'wall s':>8}")
for name, ranks, epoch_s, rate, epochs, accuracy, wall in rows:
    print(f"{name:20} {ranks:5d} {epoch_s:8.1f} {rate:9.0f} {epochs:6d} {accuracy:10.2f} {wall:8.1f}")
print("s/epoch and images/s: training only, mean over epochs; wall s: to the last epoch's test, from the start of training")
EOF
[ ${#logs[@]} -eq 0 ] || python3 examples/train/plot.py -o "$out/accuracy.png" "${logs[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "train-comparison.sh: failed: ${failed[*]}" >&2
  exit 1
fi
