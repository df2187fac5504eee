#!/usr/bin/env bash
# The TF32 implicit-GEMM convolution kernels' own source, run on the host by
# tests/emu/igemm-emu.sh (every configuration of every direction on seven small
# convolutions, against a double reference, with cp.async copies landing
# early and late): their index arithmetic and pipeline order checked on
# every machine, GPU or not.  Skipped (77) without g++, python3 or the CUDA headers.
exec bash "$(dirname "$0")/emu/check.sh" igemm-emu.sh python3
