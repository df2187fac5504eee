#!/usr/bin/env bash
# GPipe's bubble on CPU ranks: `mpirun -np 2 cortado time --pipeline=relu1`
# over a net of two balanced stages (a 1024-wide InnerProduct and ReLU
# each, batch 64 of DummyData, force_backward), for M = 2, 4 and 8 micro-batches; prints
# each stage's measured bubble (idle in receives and in the iteration's
# agreement, over the iteration's wall time) beside (P - 1) / (M + P - 1).
# WIDTH (default 1024) sets the InnerProducts' width: the larger, the more
# a micro-batch computes against the iteration's fixed costs.
#
#   [WIDTH=N] bench/pipeline_bubble.sh [BUILD_DIR] [ITERATIONS]
#
# Timing: give it an otherwise idle machine with a core per rank (one
# OpenBLAS thread each); on a loaded one the stages are not balanced.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-"$here/../build"}
iters=${2:-20}
bin="$build/cortado"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
width=${WIDTH:-1024}
# force_backward: stage 0's first InnerProduct computes its input's gradient
# too, so that both stages' backwards do the same work (without it stage 1
# has a third more backward, and stage 0 idles for the difference)
cat >"$dir/net.prototxt" <<NET
name: "balanced"
force_backward: true
layer { name: "data" type: "DummyData" top: "x" top: "label"
  dummy_data_param { shape { dim: 64 dim: $width } shape { dim: 64 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h1"
  inner_product_param { num_output: $width weight_filler { type: "gaussian" std: 0.03 } } }
layer { name: "relu1" type: "ReLU" bottom: "h1" top: "h1" }
layer { name: "ip2" type: "InnerProduct" bottom: "h1" top: "h2"
  inner_product_param { num_output: $width weight_filler { type: "gaussian" std: 0.03 } } }
layer { name: "relu2" type: "ReLU" bottom: "h2" top: "h2" }
layer { name: "ip3" type: "InnerProduct" bottom: "h2" top: "y"
  inner_product_param { num_output: 10 weight_filler { type: "gaussian" std: 0.03 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "y" bottom: "label" top: "loss" }
NET
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
printf "%3s %6s %10s %10s\n" M expect stage0 stage1
for m in 2 4 8; do
  out=$(mpirun --oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -np 2 \
    "$bin" time --model="$dir/net.prototxt" --pipeline=relu1 --microbatches=$m --iterations="$iters" 2>&1)
  b0=$(grep -o 'stage 0: .*(bubble [0-9.]*%' <<<"$out" | grep -o '[0-9.]*%$')
  b1=$(grep -o 'stage 1: .*(bubble [0-9.]*%' <<<"$out" | grep -o '[0-9.]*%$')
  printf "%3d %5.1f%% %10s %10s\n" "$m" "$(awk -v m="$m" 'BEGIN { print 100 / (m + 1) }')" "$b0" "$b1"
done
