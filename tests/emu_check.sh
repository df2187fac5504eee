#!/usr/bin/env bash
# What the sh_*_emu tests share: runs scripts/SCRIPT (a host emulator of
# GPU kernels) and passes when it prints "0 failures" last, with the count
# of runs within bounds.  Skipped (77) without g++ or the CUDA headers.
#
# Usage: tests/emu_check.sh SCRIPT
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
command -v g++ >/dev/null && [ -f "$cuda/include/cuda_runtime.h" ] ||
  { echo "no g++ or CUDA headers: skipped"; exit 77; }
out=$(bash "$root/scripts/$1" 2>&1) || { echo "$out" | tail -20; exit 1; }
echo "$out" | grep -c " ok$" | sed 's/^/runs within 1e-5 of the largest value: /'
echo "$out" | tail -1
echo "$out" | tail -1 | grep -qx "0 failures"
