#!/usr/bin/env bash
# How much Python costs: net.forward() of LeNet (batch 64, the deploy net of
# Caffe's MNIST example with its trained weights) from Python against the
# same forward through cortado.h from C (bench/py_forward.c, which also
# reads the output on the host, as net.forward() hands it back).
#
#   bench/py_overhead.sh [BUILD_DIR] [GPU]      (BUILD_DIR default build)
#
# The two alternate, PAIRS times (default 7), each a process of ROUNDS
# rounds of ITERS forwards (defaults 5 and 200), so that both see the same
# machine; per side the fastest round (least disturbed by other work) and
# the median round are printed, and the overhead of Python, (py - c) / c.
# Environment: PAIRS, ROUNDS, ITERS, CORTADO_FIXTURES.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
GPU=${2:-}
FIX=${CORTADO_FIXTURES:-$ROOT/../shared/fixtures/caffe}
PAIRS=${PAIRS:-7}
ROUNDS=${ROUNDS:-5}
ITERS=${ITERS:-200}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
C=$BUILD/bench/py_forward_c
[ -x "$C" ] || { echo "py_overhead: $C not built (cmake --build $BUILD --target py_forward_c)" >&2; exit 1; }
out=$(mktemp)
for _ in $(seq "$PAIRS"); do
  "$C" "$FIX/lenet.prototxt" "$FIX/lenet_iter_10000.caffemodel" "$ITERS" "$ROUNDS" $GPU >>"$out"
  python3 "$ROOT/bench/py_forward.py" "$FIX/lenet.prototxt" "$FIX/lenet_iter_10000.caffemodel" "$ITERS" \
    "$ROUNDS" $GPU >>"$out"
done
python3 - "$out" "${GPU:-cpu}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
c = sorted(float(v) for k, v in rows if k == 'c')
py = sorted(float(v) for k, v in rows if k == 'py')
print('device %s: %d rounds each' % (sys.argv[2], len(c)))
print('C (cortado.h)     min %8.1f us  median %8.1f us' % (c[0], statistics.median(c)))
print('Python forward()  min %8.1f us  median %8.1f us' % (py[0], statistics.median(py)))
print('Python overhead   min %+6.2f %%   median %+6.2f %%' % (
    100 * (py[0] - c[0]) / c[0], 100 * (statistics.median(py) - statistics.median(c)) / statistics.median(c)))
PY
rm -f "$out"
