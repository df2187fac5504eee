#!/usr/bin/env bash
# Checks the Winograd F(2x2, 5x5) kernels (src/layers/conv_winograd.cu) on
# the host, no GPU needed: builds scripts/wino_emu/emu.cpp around the
# kernels' own source and runs every configuration (IG_WINO_CONFIGS), forward
# and backward data, on small 5x5 convolutions against a double reference.
# Needs g++ and the CUDA headers (CUDA_HOME, default /usr/local/cuda).  CASE
# runs one shape.
#
# Usage: scripts/wino-emu.sh [CASE]
set -euo pipefail
cd "$(dirname "$0")/.."
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the configurations come from the implicit-GEMM kernels' shared header
sed -n '/^#define IG_WINO_CONFIGS/,/^$/p' src/layers/conv_igemm_impl.cuh >"$work/wino_configs.h"
g++ -std=c++17 -O2 -w -I"$cuda/include" -Isrc -include "$work/wino_configs.h" \
  scripts/wino_emu/emu.cpp -o "$work/emu"
"$work/emu" "${1:--1}"
