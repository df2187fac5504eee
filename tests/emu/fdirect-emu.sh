#!/usr/bin/env bash
# Checks the direct forward kernel (src/layers/conv/conv_fwd_direct.cu) on the
# host, no GPU needed: builds tests/emu/fdirect_emu/emu.cpp around the
# kernel's own source and runs every configuration (IG_FDIRECT_CONFIGS),
# with and without bias and ReLU, on few-channel 5x5 convolutions against a
# double reference.  Needs g++ and the CUDA headers (CUDA_HOME, default
# /usr/local/cuda).  CASE runs one shape.
#
# Usage: tests/emu/fdirect-emu.sh [CASE]
exec bash "$(dirname "$0")/run.sh" fdirect_emu IG_FDIRECT_CONFIGS "$@"
