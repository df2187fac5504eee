#!/usr/bin/env bash
# Checks the direct filter-gradient kernels (src/layers/conv/conv_wgrad_direct.cu)
# on the host, no GPU needed: builds tests/emu/dwgrad_emu/emu.cpp around the
# kernels' own source and runs every configuration (IG_DIRECT_WGRAD_CONFIGS)
# on small stride-1 convolutions against a double reference.  Needs g++ and
# the CUDA headers (CUDA_HOME, default /usr/local/cuda).  CASE runs one
# shape.
#
# Usage: tests/emu/dwgrad-emu.sh [CASE]
exec bash "$(dirname "$0")/run.sh" dwgrad_emu IG_DIRECT_WGRAD_CONFIGS "$@"
