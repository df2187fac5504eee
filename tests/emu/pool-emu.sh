#!/usr/bin/env bash
# Checks the GPU pooling kernels on the host, no GPU needed: builds
# tests/emu/pool_emu/pool_emu.cpp around the kernels of src/layers/pooling.cu
# (cut out between its includes and its launchers) and runs the batched
# kernels against the plain ones, bit for bit.  BUILD_DIR is a configured
# build (for the generated caffe.pb-c.h).  Needs g++.
#
# Usage: tests/emu/pool-emu.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed -n '/^enum { POOL_MAX/,/^\/\* pool_bwd_cell over every/p' src/layers/pooling.cu | sed '$d' \
  > "$work/kernels.inc"
grep -q pool_bwd_cell "$work/kernels.inc" || { echo "pool-emu: kernels not found in pooling.cu" >&2; exit 1; }
g++ -std=c++17 -O1 -w -Isrc -I"$build/proto" -I"$work" tests/emu/pool_emu/pool_emu.cpp -o "$work/pool_emu"
"$work/pool_emu"
