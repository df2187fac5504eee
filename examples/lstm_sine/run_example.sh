#!/usr/bin/env bash
# The LSTM example: an LSTM learns to predict the next value of sine waves
# whose periods it must infer from their past (see make_sine_h5.c).
#
#   bash examples/lstm_sine/run_example.sh BUILD_DIR [WORK_DIR]
#
# 1. BUILD_DIR/examples/make_sine_h5 (built with Cortado) writes 4000
#    training and 1000 test steps of 16 streams to HDF5 files in
#    WORK_DIR/examples/lstm_sine/data (WORK_DIR: the repository root unless
#    given; the prototxts are copied there when it is another folder);
# 2. `cortado train --solver=examples/lstm_sine/lstm_sine_solver.prototxt`
#    runs in WORK_DIR on the CPU: 1500 Adam iterations of T = 20 steps,
#    about a second on one core; the log goes to WORK_DIR/examples/lstm_sine/data/train.log;
# 3. passes when the last "Test net output #0: loss = X" is below MAX_LOSS
#    (default 0.05).  Seen: 0.0071, where the naive guess y_{t+1} = y_t
#    scores 0.50.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: bash examples/lstm_sine/run_example.sh BUILD_DIR [WORK_DIR]" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd)
BIN=$BUILD/cortado
GEN=$BUILD/examples/make_sine_h5
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=${2:-$ROOT}
MAX_LOSS=${MAX_LOSS:-0.05}
say() { echo "run_example: $*" >&2; }
for f in "$BIN" "$GEN"; do
  [ -x "$f" ] || { say "$f not found (build first: make build)"; exit 1; }
done

HERE=examples/lstm_sine
mkdir -p "$WORK/$HERE/data"
WORK=$(cd "$WORK" && pwd)
if [ "$WORK" != "$ROOT" ]; then
  cp "$ROOT/$HERE/lstm_sine_net.prototxt" "$ROOT/$HERE/lstm_sine_solver.prototxt" "$WORK/$HERE/"
fi
cd "$WORK"

# --- 1. the data
"$GEN" "$HERE/data/train.h5" 4000 16 1
"$GEN" "$HERE/data/test.h5" 1000 16 2
echo "$HERE/data/train.h5" > "$HERE/data/train_list.txt"
echo "$HERE/data/test.h5" > "$HERE/data/test_list.txt"

# --- 2. training
LOG=$HERE/data/train.log
say "cortado train --solver=$HERE/lstm_sine_solver.prototxt (log: $WORK/$LOG)"
set +e
"$BIN" train --solver="$HERE/lstm_sine_solver.prototxt" > "$LOG" 2>&1
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  tail -n 20 "$LOG" >&2
  say "cortado train failed (exit status $rc)"
  exit 1
fi

# --- 3. the result
loss=$(grep -oE 'Test net output #0: loss = [-+0-9.eE]+' "$LOG" | tail -n 1 | awk '{print $NF}')
if [ -z "$loss" ]; then
  say "no 'Test net output #0: loss = X' line in $LOG"
  exit 1
fi
if awk -v a="$loss" -v m="$MAX_LOSS" 'BEGIN {exit !(a + 0 < m + 0)}'; then
  say "final test loss $loss < $MAX_LOSS: passed"
else
  say "final test loss $loss >= $MAX_LOSS: FAILED"
  exit 1
fi
