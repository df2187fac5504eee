#!/usr/bin/env bash
# The direct filter-gradient kernels' own source, run on the host by
# tests/emu/dwgrad-emu.sh: every configuration on seven small stride-1 5x5
# convolutions (odd sizes, pads 0 to 4, one-pixel images, channel counts
# that fill no block, bands of rows cut short), each as one slice added
# onto dW and in two splits among blocks, against a double reference, on
# every machine, GPU or not.  Skipped (77) without g++ or the CUDA headers.
exec bash "$(dirname "$0")/emu/check.sh" dwgrad-emu.sh
