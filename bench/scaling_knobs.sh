#!/usr/bin/env bash
# Where a data-parallel iteration on N GPUs loses time against one GPU:
# bench/scaling.sh's 1-GPU and N-GPU runs of one net, repeated under each
# of a list of settings (cortado flags and NCCL environment), one table row
# each, all in one call and against the same cuDNN algorithms.
#
#   [NET=resnet50] [PRECISION=bf16] [GPUS=0,1] [ITERS=80] bench/scaling_knobs.sh [BUILD_DIR]
#
# KNOBS (one setting a line, "LABEL|FLAGS|ENV"; the default list below):
# the all-reduce in float32 (no 16-bit conversions beside backward), larger
# buckets (fewer launches), NCCL's protocols, its block count, and worker
# threads instead of processes.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-"$here/../build"}
NET=${NET:-resnet50}
PRECISION=${PRECISION:-bf16}
GPUS=${GPUS:-0,1}
ITERS=${ITERS:-80}
OUT=${OUT:-/tmp/cortado_scaling_knobs}
KNOBS=${KNOBS:-"default||
allreduce fp32|--allreduce_dtype=fp32|
buckets 100 MB|--bucket_mb=100|
buckets 6 MB|--bucket_mb=6|
NCCL Simple||NCCL_PROTO=Simple
NCCL LL128||NCCL_PROTO=LL128
NCCL 32 blocks||NCCL_MIN_CTAS=32
worker threads|--dp_workers=threads|
default again||"}
mkdir -p "$OUT"
echo "| setting | 1 GPU img/s | $(awk -F, '{print NF}' <<<"$GPUS") GPUs img/s | scaling | all-reduce done after backward |"
echo "| --- | --- | --- | --- | --- |"
while IFS='|' read -r label flags envs; do
  [ -n "$label" ] || continue
  log="$OUT/$(tr -c 'a-zA-Z0-9\n' _ <<<"$label").txt"
  # shellcheck disable=SC2086
  env $envs OUT="$OUT/runs" NETS="$NET" PRECISION="$PRECISION" GPUS="$GPUS" ITERS="$ITERS" EACH_GPU=0 \
    ROUNDS=1 TORCH=0 CORTADO_FLAGS="$flags" bash "$here/scaling.sh" "$build" >"$log" 2>&1
  row=$(grep -E "^$NET +dummy" "$log" | head -1)
  read -r _ _ _ _ _ one many scale _ <<<"$row"
  tail_ms=$(grep -oE '\([0-9.]+ ms after backward\)' "$log" | head -1 | tr -d '()')
  echo "| $label | ${one:-fail} | ${many:-fail} | ${scale:-fail} | ${tail_ms:--} |"
done <<<"$KNOBS"
