#!/usr/bin/env bash
# Checks the Winograd F(2x2, 5x5) kernels (src/layers/conv/conv_winograd.cu) on
# the host, no GPU needed: builds tests/emu/wino_emu/emu.cpp around the
# kernels' own source and runs every configuration (IG_WINO_CONFIGS), forward
# and backward data, on small 5x5 convolutions against a double reference.
# Needs g++ and the CUDA headers (CUDA_HOME, default /usr/local/cuda).  CASE
# runs one shape.
#
# Usage: tests/emu/wino-emu.sh [CASE]
exec bash "$(dirname "$0")/run.sh" wino_emu IG_WINO_CONFIGS "$@"
