#!/usr/bin/env bash
# GPU shards without MPI: two `cortado train` processes, shard K on GPU K,
# meet through a file store; the NCCL id made by shard 0 goes through the
# store and one NCCL communicator spans both processes.  The parameters
# after training must equal, bit for bit, those of one process training on
# --gpu=0,1 as threads (two ranks: every sum is a + b either way).  Then
# 2 shards x 2 GPUs (world 4, global rank = shard x 2 + local index) when
# there are 4 GPUs.  Skips (77) with fewer than 2 GPUs.
# Needs CORTADO_BIN (set by ctest).
set -euo pipefail

BIN=${CORTADO_BIN:?CORTADO_BIN is not set}
TMP=${CORTADO_TMP:-/tmp}/sh_gloo_gpu
rm -rf "$TMP"
mkdir -p "$TMP"
source "$(dirname "$0")/gpu_count.sh"
ngpu=$(ct_gpu_count)
[ "$ngpu" -ge 2 ] || { echo "fewer than 2 GPUs ($ngpu): skipped"; exit 77; }

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$TMP"/*.log; do [ -f "$f" ] && { echo "---- $f" >&2; tail -n 15 "$f" >&2; }; done
  exit 1
}

cat >"$TMP/net.prototxt" <<'NET'
name: "gpushards"
layer { name: "data" type: "DummyData" top: "x" top: "label"
  dummy_data_param { shape { dim: 16 dim: 64 } shape { dim: 16 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
  inner_product_param { num_output: 128 weight_filler { type: "gaussian" std: 0.05 } } }
layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y"
  inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.05 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "y" bottom: "label" top: "loss" }
NET
solver() {
  cat >"$TMP/$1.solver.prototxt" <<SOLVER
net: "$TMP/net.prototxt"
base_lr: 0.05 lr_policy: "fixed" momentum: 0.9
max_iter: 20 display: 10 random_seed: 7 snapshot_prefix: "$TMP/$1"
solver_mode: GPU
SOLVER
}

# shards NAME GPUS0 GPUS1: two shards, shard 0 on GPUS0 and shard 1 on GPUS1.
shards() {
  local name=$1
  solver "$name"
  mkdir -p "$TMP/$name.store"
  local common=(train --solver="$TMP/$name.solver.prototxt" --num_shards=2 --run_id="$name"
    --file_store_path="$TMP/$name.store" --rendezvous_timeout=60 --comm_timeout=60 --math=fp32)
  "$BIN" "${common[@]}" --shard_id=0 --gpu="$2" >"$TMP/$name.shard0.log" 2>&1 &
  local p0=$!
  PIDS+=("$p0")
  "$BIN" "${common[@]}" --shard_id=1 --gpu="$3" >"$TMP/$name.shard1.log" 2>&1 &
  local p1=$!
  PIDS+=("$p1")
  wait "$p0" || fail "$name: shard 0 failed"
  wait "$p1" || fail "$name: shard 1 failed"
}

shards two 0 1
grep -F "Data-parallel training: 1 node, 2 ranks (2 shards of run 'two'" "$TMP/two.shard0.log" || fail "no world line"
grep -F "2 GPUs (1 per shard); transport NCCL" "$TMP/two.shard0.log" || fail "no GPU/NCCL world"
grep -F "effective batch 32 = 16 x 2 GPUs" "$TMP/two.shard0.log" || fail "no effective batch line"

solver threads
"$BIN" train --solver="$TMP/threads.solver.prototxt" --gpu=0,1 --math=fp32 >"$TMP/threads.log" 2>&1 ||
  fail "the threaded run failed"
cmp "$TMP/two_iter_20.caffemodel" "$TMP/threads_iter_20.caffemodel" ||
  fail "2 GPU shards differ from 2 GPU threads"
echo "2 shards x 1 GPU: parameters identical to one process on --gpu=0,1"

if [ "$ngpu" -ge 4 ]; then
  shards four 0,1 2,3
  grep -F "4 ranks (2 shards of run 'four'" "$TMP/four.shard0.log" || fail "no 4-rank world line"
  grep -F "4 GPUs (2 per shard)" "$TMP/four.shard0.log" || fail "no 4-GPU world"
  echo "2 shards x 2 GPUs: trained, world of 4"
fi
echo "PASS"
