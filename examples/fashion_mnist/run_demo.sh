#!/usr/bin/env bash
# The `make demo` run: BVLC's LeNet trained on Fashion-MNIST.
#
#   bash examples/fashion_mnist/run_demo.sh BUILD_DIR
#
# 1. Finds Fashion-MNIST's idx files in /usr/share/datasets/fashion-mnist
#    (Debian's dataset-fashion-mnist); installs the package when missing and
#    running as root, else prints the command to run and stops.
# 2. Converts the train and test sets to LMDB with `cortado convert_mnist_data`
#    into examples/fashion_mnist/fashion_mnist_{train,test}_lmdb, skipping a
#    database that already holds every record (a partial one is rebuilt).
# 3. Trains with `cortado train --solver=examples/fashion_mnist/lenet_solver.prototxt`
#    (on GPU 0 when `cortado device_query` finds one, else on the CPU), logging
#    to BUILD_DIR/fashion_mnist_train.log.
# 4. Passes when the last "Test net output #0: accuracy = X" is at least
#    MIN_ACCURACY (default 0.87); exits non-zero otherwise.
#
# Environment: FASHION_MNIST_DIR (the idx folder), DEMO_GPU (a --gpu value;
# empty string for the CPU), MIN_ACCURACY.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: bash examples/fashion_mnist/run_demo.sh BUILD_DIR" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd)
BIN=$BUILD/cortado
[ -x "$BIN" ] || { echo "run_demo: $BIN not found (build first: make build)" >&2; exit 1; }

# The prototxts name their paths relative to the repository root.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
HERE=examples/fashion_mnist
DATA=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
MIN_ACCURACY=${MIN_ACCURACY:-0.87}
PACKAGE=dataset-fashion-mnist

say() { echo "run_demo: $*" >&2; }

# --- 1. the data set
if [ ! -f "$DATA/train-images-idx3-ubyte.gz" ]; then
  if [ "$DATA" != /usr/share/datasets/fashion-mnist ]; then
    say "$DATA/train-images-idx3-ubyte.gz is missing (FASHION_MNIST_DIR=$DATA)"
    exit 1
  fi
  if [ "$(id -u)" -eq 0 ]; then
    say "installing $PACKAGE"
    apt-get install -y "$PACKAGE" || { apt-get update && apt-get install -y "$PACKAGE"; }
  else
    say "Fashion-MNIST is missing; install it with:"
    say "  sudo apt-get install $PACKAGE"
    exit 1
  fi
fi

# --- 2. the LMDBs
# records DB: the record count `cortado db_info` reports, or 0 when unreadable.
records() {
  "$BIN" db_info "$1" --backend=lmdb 2>/dev/null | awk '$1 == "records:" {print $2; exit}' ||
    true
}

convert() { # convert SPLIT IMAGES LABELS COUNT
  local db=$HERE/fashion_mnist_$1_lmdb
  if [ -d "$db" ]; then
    local have
    have=$(records "$db")
    if [ "${have:-0}" = "$4" ]; then
      say "$db holds all $4 records; not converting again"
      return
    fi
    say "$db holds ${have:-no} records instead of $4; converting again"
    rm -rf "$db"
  fi
  "$BIN" convert_mnist_data "$DATA/$2" "$DATA/$3" "$db" --backend=lmdb
  local got
  got=$(records "$db")
  if [ "${got:-0}" != "$4" ]; then
    say "$db: expected $4 records after converting, found ${got:-none}"
    exit 1
  fi
}
convert train train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz 60000
convert test t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz 10000

# --- 3. training
if [ -z "${DEMO_GPU+set}" ]; then
  DEMO_GPU=
  if "$BIN" device_query --gpu=0 >/dev/null 2>&1; then DEMO_GPU=0; fi
fi
LOG=$BUILD/fashion_mnist_train.log
args=(train --solver=$HERE/lenet_solver.prototxt)
[ -n "$DEMO_GPU" ] && args+=(--gpu="$DEMO_GPU")
say "cortado ${args[*]} (log: $LOG)"
set +e
"$BIN" "${args[@]}" 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
  say "cortado train failed (exit status $rc)"
  exit 1
fi

# --- 4. the result
accuracy=$(grep -oE 'Test net output #0: accuracy = [-+0-9.eE]+' "$LOG" | tail -n 1 |
  awk '{print $NF}')
if [ -z "$accuracy" ]; then
  say "no 'Test net output #0: accuracy = X' line in $LOG"
  exit 1
fi
if awk -v a="$accuracy" -v m="$MIN_ACCURACY" 'BEGIN {exit !(a + 0 >= m + 0)}'; then
  say "final test accuracy $accuracy >= $MIN_ACCURACY: passed"
else
  say "final test accuracy $accuracy < $MIN_ACCURACY: FAILED"
  exit 1
fi
