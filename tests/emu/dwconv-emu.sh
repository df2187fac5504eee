#!/usr/bin/env bash
# Checks the depthwise convolution kernels (src/layers/conv/conv_depthwise.cu)
# on the host, no GPU needed: builds tests/emu/dwconv_emu/emu.cpp around the
# kernels (cut out of the file between its "forward" and "host" sections)
# and runs forward, backward data and the filter gradient in both memory
# orders on depthwise shapes against a double reference.  Needs g++ and the
# CUDA headers (CUDA_HOME, default /usr/local/cuda).
#
# Usage: tests/emu/dwconv-emu.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=src/layers/conv/conv_depthwise.cu
sed -n '/^struct dw_geom {/,/^};/p' "$src" > "$work/kernels.inc"
sed -n '/^\/\* -* forward \*\//,/^\/\* -* host \*\//p' "$src" >> "$work/kernels.inc"
grep -q dw_wgrad_sum "$work/kernels.inc" || { echo "dwconv-emu: kernels not found in $src" >&2; exit 1; }
g++ -std=c++17 -O1 -w -I"$cuda/include" -Isrc -I"$work" tests/emu/dwconv_emu/emu.cpp -o "$work/emu"
"$work/emu"
