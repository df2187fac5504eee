#!/usr/bin/env bash
# The direct filter-gradient kernels' own source, run on the host by
# scripts/dwgrad-emu.sh: every configuration on seven small stride-1 5x5
# convolutions (odd sizes, pads 0 to 4, one-pixel images, channel counts
# that fill no block, bands of rows cut short), each as one slice added
# onto dW and in two splits among blocks, against a double reference, on
# every machine, GPU or not.  Skipped (77) without g++ or the CUDA headers.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
command -v g++ >/dev/null && [ -f "$cuda/include/cuda_runtime.h" ] ||
  { echo "no g++ or CUDA headers: skipped"; exit 77; }
out=$(bash "$root/scripts/dwgrad-emu.sh" 2>&1) || { echo "$out" | tail -20; exit 1; }
echo "$out" | grep -c " ok$" | sed 's/^/runs within 1e-5 of the largest value: /'
echo "$out" | tail -1
echo "$out" | tail -1 | grep -qx "0 failures"
