#!/usr/bin/env bash
# The Winograd F(2x2, 5x5) convolution kernels' own source, run on the host
# by tests/emu/wino-emu.sh: every configuration, forward (with and without
# bias and ReLU) and backward data, on seven small 5x5 convolutions (odd
# sizes, pads 0 to 4, one-pixel images, channel counts that fill no block)
# against a double reference, on every machine, GPU or not.  Skipped (77)
# without g++ or the CUDA headers.
exec bash "$(dirname "$0")/emu/check.sh" wino-emu.sh
