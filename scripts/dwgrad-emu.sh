#!/usr/bin/env bash
# Checks the direct filter-gradient kernels (src/layers/conv_wgrad_direct.cu)
# on the host, no GPU needed: builds scripts/dwgrad_emu/emu.cpp around the
# kernels' own source and runs every configuration (IG_DIRECT_WGRAD_CONFIGS)
# on small stride-1 convolutions against a double reference.  Needs g++ and
# the CUDA headers (CUDA_HOME, default /usr/local/cuda).  CASE runs one
# shape.
#
# Usage: scripts/dwgrad-emu.sh [CASE]
set -euo pipefail
cd "$(dirname "$0")/.."
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the configurations come from the implicit-GEMM kernels' shared header
sed -n '/^#define IG_DIRECT_WGRAD_CONFIGS/,/^$/p' src/layers/conv_igemm_impl.cuh >"$work/configs.h"
g++ -std=c++17 -O2 -w -I"$cuda/include" -Isrc -include "$work/configs.h" \
  scripts/dwgrad_emu/emu.cpp -o "$work/emu"
"$work/emu" "${1:--1}"
