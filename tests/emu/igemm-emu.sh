#!/usr/bin/env bash
# Checks the TF32 implicit-GEMM kernels' index arithmetic on the host, no
# GPU needed: builds tests/emu/igemm_emu/emu.cpp around the kernels' own
# source (cut out by extract.py) and runs every TF32 configuration of every
# direction on small convolutions (cifar10_quick-like shapes, 70 outputs,
# odd sizes, stride 2, dilation), against a double reference.  Needs g++
# and the CUDA headers (CUDA_HOME, default /usr/local/cuda).  Takes minutes;
# CASE (0..6) runs one shape.
#
# Usage: tests/emu/igemm-emu.sh [CASE]
set -euo pipefail
cd "$(dirname "$0")/../.."
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 tests/emu/igemm_emu/extract.py src/layers/conv "$work"
g++ -std=c++17 -O1 -w -I"$cuda/include" -Isrc -I"$work" tests/emu/igemm_emu/emu.cpp -o "$work/emu"
"$work/emu" "${1:--1}"
