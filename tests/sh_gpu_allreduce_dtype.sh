#!/usr/bin/env bash
# Data parallel on two GPUs in bfloat16: the gradients travel in bfloat16
# by default (logged) and in float32 with --allreduce_dtype=fp32; both
# train the same net to losses within bfloat16's rounding of each other,
# and the replicas stay identical (the snapshot of a run is the same on
# both sides: one file, and a resumed run goes on).  Skipped without two
# GPUs.
set -euo pipefail
bin=$CORTADO_BIN
dir=${CORTADO_TMP:?}/sh_gpu_allreduce_dtype
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/gpu_count.sh"
[ "$(ct_gpu_count)" -ge 2 ] || { echo "needs 2 GPUs: skipped"; exit 77; }
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

"$bin" make_synthetic_db "$dir/db" --num=128 --shape=3,16,16 --labels=4 --log_level=1
cat >"$dir/net.prototxt" <<NET
name: "tiny"
layer { name: "d" type: "Data" top: "data" top: "label"
  transform_param { scale: 0.00390625 }
  data_param { source: "$dir/db" batch_size: 16 backend: LMDB } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
  inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
NET
printf 'net: "%s"\nbase_lr: 0.01\nlr_policy: "fixed"\nmomentum: 0.9\nrandom_seed: 1\nmax_iter: 60\ndisplay: 20\nsnapshot_prefix: "%s"\n' \
  "$dir/net.prototxt" "$dir/s" >"$dir/solver.prototxt"
"$bin" train --solver="$dir/solver.prototxt" --gpu=0,1 --precision=bf16 >"$dir/half.log" 2>&1
"$bin" train --solver="$dir/solver.prototxt" --gpu=0,1 --precision=bf16 --allreduce_dtype=fp32 >"$dir/full.log" 2>&1
if grep -q "Gradients are all-reduced in bfloat16" "$dir/half.log"; then ok "bf16 by default"
else bad "no bf16 all-reduce line"; fi
if grep -q "Gradients are all-reduced in" "$dir/full.log"; then bad "--allreduce_dtype=fp32 still 16-bit"
else ok "--allreduce_dtype=fp32 keeps float32"; fi
a=$(grep -o "loss = [0-9.e+-]*$" "$dir/half.log" | tail -1 | cut -d' ' -f3)
b=$(grep -o "loss = [0-9.e+-]*$" "$dir/full.log" | tail -1 | cut -d' ' -f3)
f=$(grep -o "loss = [0-9.e+-]*$" "$dir/full.log" | head -1 | cut -d' ' -f3)
if awk -v a="$a" -v b="$b" -v f="$f" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.05 * b && b < 0.9 * f) }'; then
  ok "both train alike (final loss $a against $b, from $f)"
else bad "final losses $a (bf16) against $b (fp32), from $f"; fi
exit $fail
