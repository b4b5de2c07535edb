#!/usr/bin/env bash
# Installs every Debian package that building, testing and benchmarking Chorus
# needs, then the Python packages pinned in python/requirements.txt (pip, for
# the python3 on PATH: the Python package, its tests, the PyTorch backend).
# Idempotent; run as root (or with sudo) on Debian 12.
#
# Opt-in: INSTALL_TF=1 (or the argument --tf) also installs TensorFlow
# (tensorflow-cpu, examples/train/requirements-tf.txt) for
# examples/train/train_tf.py; CI does not.
set -euo pipefail
install_tf="${INSTALL_TF:-0}"
for arg in "$@"; do
  case "$arg" in
    --tf) install_tf=1 ;;
    *) echo "install-deps: unknown argument $arg (only --tf)" >&2; exit 2 ;;
  esac
done
packages=(
  build-essential pkg-config meson ninja-build   # build
  catch2                                          # tests (Catch2 v2)
  libspdlog-dev libfmt-dev                        # logging
  libcli11-dev nlohmann-json3-dev                 # CLI parsing, TF_CONFIG JSON
  libxxhash-dev                                   # call signature digests
  libhwloc-dev libucx-dev                         # topology, UCX transport
  openmpi-bin libopenmpi-dev                      # benchmark comparison only
  python3-matplotlib                              # bench/plot.py (test bench-plot)
  dataset-fashion-mnist                           # examples/train (test train-example)
  patchelf                                        # pip install . (meson-python relocates libchorus)
  iproute2 procps psmisc python3                  # test helpers (netns, pgrep, killall)
  clang-format
  clang-14 libclang-rt-14-dev                     # fuzz targets (libFuzzer; suite fuzz)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} Debian packages present"
else
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

requirements="$(dirname "$0")/../python/requirements.txt"
if python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -r "$requirements"; then
  echo "install-deps: Python packages of $requirements present"
else
  echo "install-deps: pip could not install $requirements" >&2
  exit 1
fi

if [ "$install_tf" = 1 ]; then
  tf_requirements="$(dirname "$0")/../examples/train/requirements-tf.txt"
  if python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -r "$tf_requirements"; then
    echo "install-deps: TensorFlow of $tf_requirements present"
  else
    echo "install-deps: pip could not install $tf_requirements" >&2
    exit 1
  fi
fi
