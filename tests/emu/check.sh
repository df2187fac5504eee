#!/usr/bin/env bash
# What the sh_*_emu tests share: runs tests/emu/SCRIPT (a host emulator of
# GPU kernels) and passes when it prints "0 failures" last; prints how many
# runs came out within the emulator's tolerance ("... ok" lines).  Skipped
# (77) without g++, the CUDA headers or one of the further TOOLs.
#
# Usage: tests/emu/check.sh SCRIPT [TOOL...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
script=$1
shift
for tool in g++ "$@"; do
  command -v "$tool" >/dev/null || { echo "no $tool: skipped"; exit 77; }
done
[ -f "$cuda/include/cuda_runtime.h" ] || { echo "no CUDA headers: skipped"; exit 77; }
out=$(bash "$root/tests/emu/$script" 2>&1) || { echo "$out" | tail -20; exit 1; }
echo "$out" | grep -c " ok$" | sed 's/^/runs within tolerance: /'
echo "$out" | tail -1
echo "$out" | tail -1 | grep -x "0 failures" >/dev/null
