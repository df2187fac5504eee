#!/usr/bin/env bash
# The direct forward kernel's own source, run on the host by
# tests/emu/fdirect-emu.sh: every configuration, with and without bias and
# ReLU and into an unaligned top, on five few-channel 5x5 convolutions
# (cifar10_quick's and LeNet's first layers, rows that are no multiple of 4,
# more output channels than a block's 32, one-pixel images, pads up to 4)
# against a double reference, on every machine, GPU or not.  Skipped (77)
# without g++ or the CUDA headers.
exec bash "$(dirname "$0")/emu/check.sh" fdirect-emu.sh
