#!/usr/bin/env bash
# The depthwise convolution kernels' own source, run on the host by
# tests/emu/dwconv-emu.sh: forward, backward data and the filter gradient
# (sliced and summed as on a GPU) in NCHW and NHWC on depthwise shapes
# (strides, pads, dilation, rectangular and 5x5 windows, several filters
# per channel, channel counts that fill no block), against a double
# reference, on every machine, GPU or not.  Skipped (77) without g++ or
# the CUDA headers.
exec bash "$(dirname "$0")/emu/check.sh" dwconv-emu.sh
