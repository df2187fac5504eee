#!/usr/bin/env bash
# The GPU pooling kernels run on the host by tests/emu/pool-emu.sh: the
# batched forward and stride-cell backward kernels give the plain kernels'
# bits on 2664 geometries (MAX, AVE, STOCHASTIC, kernels 1-5, strides 1-3,
# pads, fused bias and ReLUs), on every machine, GPU or not.  Skipped (77)
# without g++.  Runs in the build directory (ctest's working directory).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command -v g++ >/dev/null || { echo "no g++: skipped"; exit 77; }
out=$(bash "$root/tests/emu/pool-emu.sh" "$PWD" 2>&1) || { echo "$out" | tail -20; exit 1; }
echo "$out"
echo "$out" | tail -1 | grep " 0 differences$" >/dev/null
