#!/usr/bin/env bash
# LeNet on Fashion-MNIST on GPU 0 in bfloat16 and in float16 reaches the
# float32 accuracy within 0.3% (lenet_precision.sh).  Skipped without a GPU.
set -euo pipefail
dir=${CORTADO_TMP:?}/sh_gpu_lenet_precision
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/gpu_count.sh"
[ "$(ct_gpu_count)" -ge 1 ] || { echo "no GPU: skipped"; exit 77; }
. "$(dirname "$0")/lenet_precision.sh"
lenet_precision "$dir" --gpu=0 bf16 fp32
lenet_precision "$dir" --gpu=0 fp16 fp32
