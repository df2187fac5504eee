#!/usr/bin/env bash
# Builds one fiber emulator (tests/emu/EMU/emu.cpp, on tests/emu/fibers.h)
# with the configuration list MACRO cut from src/layers/conv/conv_igemm_impl.cuh,
# and runs it on shape CASE (-1: every shape).  Needs g++ and the CUDA
# headers (CUDA_HOME, default /usr/local/cuda).
#
# Usage: tests/emu/run.sh EMU MACRO [CASE]
set -euo pipefail
cd "$(dirname "$0")/../.."
emu=$1 macro=$2 case=${3:--1}
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed -n "/^#define $macro/,/^\$/p" src/layers/conv/conv_igemm_impl.cuh >"$work/configs.h"
g++ -std=c++17 -O2 -w -I"$cuda/include" -Isrc -include "$work/configs.h" \
  "tests/emu/$emu/emu.cpp" -o "$work/emu"
"$work/emu" "$case"
