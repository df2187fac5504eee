#!/usr/bin/env bash
# `cortado train --trace` and `cortado time --trace` on GPUs: besides the
# host's tracks, each rank has its GPU's streams with device times (CUDA
# events, also inside replayed CUDA graphs): an "iteration N" span per
# traced iteration on the compute stream enclosing every layer step, weight
# gradients on the gradient stream, and, on two GPUs (one process each),
# each bucket's all-reduce on the communication stream, the ranks' clocks
# aligned (a bucket's all-reduce overlaps itself across the ranks) and the
# all-reduces overlapping the backward pass (tests/trace_check.py --gpu).
# Skipped without a GPU; the 2-GPU part without two.
set -euo pipefail
bin=${CORTADO_BIN:?CORTADO_BIN is not set}
here=$(cd "$(dirname "$0")" && pwd)
dir=${CORTADO_TMP:-/tmp}/sh_gpu_trace
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
. "$here/gpu_count.sh"
gpus=$(ct_gpu_count)
[ "$gpus" -ge 1 ] || { echo "no GPU: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
check() { python3 "$here/trace_check.py" "$@" || exit 1; }

"$bin" make_synthetic_db db --num=256 --shape=3,32,32 --labels=10 --log_level=1
cat >net.prototxt <<'NET'
name: "traced_gpu"
layer { name: "data" type: "Data" top: "x" top: "label" include { phase: TRAIN }
  transform_param { scale: 0.00390625 }
  data_param { source: "db" batch_size: 32 backend: LMDB } }
layer { name: "data" type: "Data" top: "x" top: "label" include { phase: TEST }
  transform_param { scale: 0.00390625 }
  data_param { source: "db" batch_size: 32 backend: LMDB } }
layer { name: "conv1" type: "Convolution" bottom: "x" top: "c1"
  convolution_param { num_output: 64 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "c1" top: "c1" }
layer { name: "conv2" type: "Convolution" bottom: "c1" top: "c2"
  convolution_param { num_output: 64 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu2" type: "ReLU" bottom: "c2" top: "c2" }
layer { name: "conv3" type: "Convolution" bottom: "c2" top: "c3"
  convolution_param { num_output: 64 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu3" type: "ReLU" bottom: "c3" top: "c3" }
layer { name: "pool" type: "Pooling" bottom: "c3" top: "p"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip" type: "InnerProduct" bottom: "p" top: "ip"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "ip" bottom: "label" top: "accuracy"
  include { phase: TEST } }
NET
printf 'net: "net.prototxt"\ntest_iter: 2\ntest_interval: 4\nbase_lr: 0.01\nmomentum: 0.9\nlr_policy: "fixed"\nmax_iter: 10\ndisplay: 2\nsnapshot: 6\nsnapshot_prefix: "snap"\nsolver_mode: GPU\n' >solver.prototxt

# one GPU: iterations 3 to 8 cover the graphs' capture and their replays
"$bin" train --solver=solver.prototxt --gpu=0 --trace=one.json --trace_iters=3:8 >one.log 2>&1 ||
  { tail -5 one.log; echo "FAIL: train --gpu=0 --trace"; exit 1; }
grep -q "Trace of 1 rank written to one.json" one.log || { echo "FAIL: no trace line"; exit 1; }
check one.json 1 3 8 --gpu --test --snapshot
# the same without CUDA graphs
CORTADO_CUDA_GRAPHS=0 "$bin" train --solver=solver.prototxt --gpu=0 --trace=plain.json \
  --trace_iters=2:5 --log_level=1 || { echo "FAIL: train --trace without graphs"; exit 1; }
check plain.json 1 2 5 --gpu
# cortado time: the timed iterations, replayed from CUDA graphs (its log says how many steps)
"$bin" time --model=net.prototxt --gpu=0 --iterations=3 --trace=time.json >time.log 2>&1 ||
  { tail -5 time.log; echo "FAIL: time --gpu=0 --trace"; exit 1; }
grep -qE "CUDA graphs: [1-9][0-9]* of [0-9]+ steps" time.log ||
  { grep "CUDA graphs" time.log; echo "FAIL: the timed iterations were not replayed from graphs"; exit 1; }
check time.json 1 0 2 --gpu --no-data

if [ "$gpus" -ge 2 ]; then
  # one bucket per layer, so that the first ones go while backward runs
  "$bin" train --solver=solver.prototxt --gpu=0,1 --bucket_mb=0.01 --trace=two.json \
    --trace_iters=3:8 >two.log 2>&1 || { tail -5 two.log; echo "FAIL: train --gpu=0,1 --trace"; exit 1; }
  grep -q "Trace of 2 ranks written to two.json" two.log || { echo "FAIL: no 2-rank trace line"; exit 1; }
  check two.json 2 3 8 --gpu --reduce
else
  echo "one GPU: the 2-GPU trace is skipped"
fi
echo "ok"
