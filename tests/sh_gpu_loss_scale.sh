#!/usr/bin/env bash
# Loss scaling in float16 on GPU 0: a net whose float16 gradients overflow
# even unscaled (loss_weight 1e6) stops on a non-finite loss without
# scaling; with dynamic scaling (--precision=fp16 turns it on) the scale
# backs off below 1, the overflowing updates are skipped on the device
# (CUDA graphs, iterations launched ahead) and the net trains; a static
# power of two on a net that does not overflow trains as no scaling does
# within float16's rounding; on two GPUs the same backoff.  Skipped without
# a GPU.
set -euo pipefail
bin=$CORTADO_BIN
dir=${CORTADO_TMP:?}/sh_gpu_loss_scale
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/gpu_count.sh"
gpus=$(ct_gpu_count)
[ "$gpus" -ge 1 ] || { echo "no GPU: skipped"; exit 77; }
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

"$bin" make_synthetic_db "$dir/db" --num=64 --shape=3,16,16 --labels=4 --log_level=1
net() { # $1 = the loss layer's extra fields
  cat <<NET
name: "tiny"
layer { name: "d" type: "Data" top: "data" top: "label"
  transform_param { scale: 0.00390625 }
  data_param { source: "$dir/db" batch_size: 16 backend: LMDB } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip"
  inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" $1 }
NET
}
net "loss_weight: 1000000" >"$dir/heavy.prototxt"
net "" >"$dir/plain.prototxt"
solver() { # $1 = net, $2 = prefix, $3 = extra
  printf 'net: "%s"\nlr_policy: "fixed"\nmomentum: 0.9\nrandom_seed: 1\nmax_iter: 60\ndisplay: 10\nsnapshot_prefix: "%s"\n%s\n' \
    "$1" "$dir/$2" "$3"
}
solver "$dir/heavy.prototxt" heavy "base_lr: 0.00000001" >"$dir/heavy_solver.prototxt"
solver "$dir/plain.prototxt" plain "base_lr: 0.01" >"$dir/plain_solver.prototxt"

set +e
"$bin" train --solver="$dir/heavy_solver.prototxt" --gpu=0 --precision=fp16 --loss_scale=off >"$dir/off.log" 2>&1
rc=$?
set -e
if [ $rc -ne 0 ] && grep -q "not finite" "$dir/off.log"; then
  ok "fp16 without scaling: the gradient overflows and training stops"
else bad "fp16 without scaling: rc $rc"; tail -5 "$dir/off.log"; fi

"$bin" train --solver="$dir/heavy_solver.prototxt" --gpu=0 --precision=fp16 --csv_log="$dir/dyn.csv" >"$dir/dyn.log" 2>&1
skips=$(grep -c "the gradient overflowed: update skipped" "$dir/dyn.log" || true)
if grep -q "Loss scaling: dynamic from 65536" "$dir/dyn.log" && [ "$skips" -ge 16 ]; then
  ok "fp16, dynamic (auto): $skips updates skipped while the scale backed off"
else bad "fp16 dynamic: $skips skips"; grep -i "scal" "$dir/dyn.log" | head; fi
scale=$(tail -1 "$dir/dyn.csv" | awk -F, '{ print $(NF-1) }')
if awk -v s="$scale" 'BEGIN { exit !(s < 1) }'; then ok "fp16 dynamic: the scale went below 1 ($scale)"
else bad "fp16 dynamic: final scale $scale"; fi
first=$(grep -o "loss = [0-9.e+-]*$" "$dir/dyn.log" | head -1 | cut -d' ' -f3)
last=$(grep -o "loss = [0-9.e+-]*$" "$dir/dyn.log" | tail -1 | cut -d' ' -f3)
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.9 * a) }'; then
  ok "fp16 dynamic: trains after the backoff (loss $first -> $last)"
else bad "fp16 dynamic: loss $first -> $last"; fi

"$bin" train --solver="$dir/plain_solver.prototxt" --gpu=0 --precision=fp16 --loss_scale=off >"$dir/p_off.log" 2>&1
"$bin" train --solver="$dir/plain_solver.prototxt" --gpu=0 --precision=fp16 --loss_scale=256 >"$dir/p_static.log" 2>&1
a=$(grep -o "loss = [0-9.e+-]*$" "$dir/p_off.log" | tail -1 | cut -d' ' -f3)
b=$(grep -o "loss = [0-9.e+-]*$" "$dir/p_static.log" | tail -1 | cut -d' ' -f3)
if awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.05 * a) }'; then
  ok "fp16 static 256 trains as no scaling ($a, $b)"
else bad "fp16 static 256: final loss $b against $a"; fi

if [ "$gpus" -ge 2 ]; then
  "$bin" train --solver="$dir/heavy_solver.prototxt" --gpu=0,1 --precision=fp16 >"$dir/dp.log" 2>&1
  dskips=$(grep -c "the gradient overflowed: update skipped" "$dir/dp.log" || true)
  dlast=$(grep -o "loss = [0-9.e+-]*$" "$dir/dp.log" | tail -1 | cut -d' ' -f3)
  if [ "$dskips" -ge 16 ] && awk -v a="$first" -v b="$dlast" 'BEGIN { exit !(b < 0.9 * a) }'; then
    ok "2 GPUs, fp16 dynamic: $dskips updates skipped, trains (loss $dlast)"
  else bad "2 GPUs: $dskips skips, loss $dlast"; tail -5 "$dir/dp.log"; fi
fi
exit $fail
