#!/usr/bin/env bash
# The TF32 implicit-GEMM convolution kernels' own source, run on the host by
# scripts/igemm-emu.sh (every configuration of every direction on seven small
# convolutions, against a double reference, with cp.async copies landing
# early and late): their index arithmetic and pipeline order checked on
# every machine, GPU or not.  Skipped (77) without g++, python3 or the CUDA headers.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
command -v g++ >/dev/null && command -v python3 >/dev/null && [ -f "$cuda/include/cuda_runtime.h" ] ||
  { echo "no g++, python3 or CUDA headers: skipped"; exit 77; }
out=$(bash "$root/scripts/igemm-emu.sh" 2>&1) || { echo "$out" | tail -20; exit 1; }
echo "$out" | grep -c " ok$" | sed 's/^/configurations checked: /'
echo "$out" | tail -1
echo "$out" | tail -1 | grep -qx "0 failures"
