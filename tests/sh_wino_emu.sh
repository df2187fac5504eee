#!/usr/bin/env bash
# The Winograd F(2x2, 5x5) convolution kernels' own source, run on the host
# by scripts/wino-emu.sh: every configuration, forward (with and without
# bias and ReLU) and backward data, on seven small 5x5 convolutions (odd
# sizes, pads 0 to 4, one-pixel images, channel counts that fill no block)
# against a double reference, on every machine, GPU or not.  Skipped (77)
# without g++ or the CUDA headers.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
command -v g++ >/dev/null && [ -f "$cuda/include/cuda_runtime.h" ] ||
  { echo "no g++ or CUDA headers: skipped"; exit 77; }
out=$(bash "$root/scripts/wino-emu.sh" 2>&1) || { echo "$out" | tail -20; exit 1; }
echo "$out" | grep -c " ok$" | sed 's/^/runs within 1e-5 of the largest value: /'
echo "$out" | tail -1
echo "$out" | tail -1 | grep -qx "0 failures"
