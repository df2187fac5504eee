#!/usr/bin/env bash
# Bus bandwidth of Cortado's NCCL all-reduce (256 MB by default, and the
# 25 MB of a gradient bucket) on the GPUs of this machine:
#
#   bench/allreduce_bw.sh [BUILD_DIR] [allreduce_bw options]
#   e.g. bench/allreduce_bw.sh build --gpus 2 --mb 256,25 --iters 20
#
# busbw = size / time * 2 (n - 1) / n, as nccl-tests reports it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-"$here/../build"}
shift $(( $# > 0 ? 1 : 0 ))
bin="$build/bench/allreduce_bw"
if [[ ! -x "$bin" ]]; then
  cmake --build "$build" --target allreduce_bw -j"$(nproc)"
fi
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
if [[ $# -eq 0 ]]; then
  set -- --gpus 2 --mb 256,25 --iters 20 --warmup 5
fi
exec "$bin" "$@"
