#!/usr/bin/env bash
# LeNet on Fashion-MNIST in bfloat16 on the CPU (oneDNN's AVX512_BF16 / AMX
# kernels) reaches the float32 accuracy within 0.3% (lenet_precision.sh).
# Skipped on a CPU without bfloat16 instructions, where --precision=bf16
# must be refused with a message naming them.
set -euo pipefail
dir=${CORTADO_TMP:?}/sh_lenet_bf16
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/lenet_precision.sh"
if ! grep -qE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
  rc=0
  out=$("${CORTADO_BIN:?}" time --model="$CORTADO_SRC/examples/fashion_mnist/lenet_train_test.prototxt" \
    --dummy_data --iterations=1 --precision=bf16 2>&1) || rc=$?
  [ $rc -ne 0 ] && grep -q "AVX512_BF16 or AMX-BF16" <<<"$out" || { echo "FAIL: $out"; exit 1; }
  echo "no bfloat16 instructions: refused as it should be; skipped"
  exit 77
fi
# Eight thousand iterations are minutes under the sanitizers: the release
# build's run is the one that counts.
[ "${CORTADO_SANITIZED:-0}" = 1 ] && { echo "skip under sanitizers"; exit 77; }
lenet_precision "$dir" --cpu bf16 fp32
