#!/usr/bin/env bash
# Loss scaling (solvers/loss_scale.h) on the CPU in float32, where a scale
# that is a power of two changes no bit: a static scale trains exactly as
# none (with iter_size and clip_gradients); a dynamic scale that starts far
# too high skips updates (weights untouched) and halves until the gradient
# is finite, then trains; clean updates double it; a resumed run goes on
# with the saved scale and counters exactly; the CSV log has the columns;
# bad flags are refused.
set -euo pipefail
bin=$CORTADO_BIN
dir=$CORTADO_TMP/sh_loss_scale
rm -rf "$dir" && mkdir -p "$dir"
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

"$bin" make_synthetic_db "$dir/db" --num=16 --shape=1,6,6 --labels=3 --log_level=1
net() { # $1 = the loss layer's extra fields
  cat <<NET
name: "tiny"
layer { name: "d" type: "Data" top: "data" top: "label"
  transform_param { scale: 0.00390625 }
  data_param { source: "$dir/db" batch_size: 4 backend: LMDB } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
  inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" $1 }
NET
}
net "" >"$dir/net.prototxt"
net "loss_weight: 10000" >"$dir/heavy.prototxt"
solver() { # $1 = net, $2 = prefix, $3 = extra fields
  printf 'net: "%s"\nlr_policy: "fixed"\nmomentum: 0.9\nrandom_seed: 1\nsolver_mode: CPU\nsnapshot_prefix: "%s"\n%s\n' \
    "$1" "$dir/$2" "$3"
}
losses() { grep -o 'loss = [0-9.e+-]*$' "$1"; }

# ---- a static power of two changes nothing -------------------------------------
common="base_lr: 0.05 max_iter: 12 display: 3 weight_decay: 0.001 iter_size: 2 clip_gradients: 0.5"
solver "$dir/net.prototxt" off "$common" >"$dir/off.prototxt"
solver "$dir/net.prototxt" static "$common" >"$dir/static.prototxt"
"$bin" train --solver="$dir/off.prototxt" --loss_scale=off >"$dir/off.log" 2>&1
"$bin" train --solver="$dir/static.prototxt" --loss_scale=1024 >"$dir/static.log" 2>&1
if cmp -s "$dir/off_iter_12.caffemodel" "$dir/static_iter_12.caffemodel"; then
  ok "static 1024: the same weights as no scaling, bit for bit"
else bad "static 1024: weights differ from no scaling"; fi
if [ "$(losses "$dir/off.log")" = "$(losses "$dir/static.log")" ] && [ -n "$(losses "$dir/off.log")" ]; then
  ok "static 1024: the same losses"; else bad "static 1024: losses differ"; fi
if grep -q "Loss scaling: static, 1024 (from --loss_scale)" "$dir/static.log" &&
   grep -q "Iteration 9, loss scale = 1024 (0 updates skipped)" "$dir/static.log"; then
  ok "static: logged"; else bad "static: log lines"; fi
if grep -q "Loss scaling" "$dir/off.log"; then bad "off: loss scaling logged"; else ok "off: nothing logged"; fi

# ---- dynamic from far too high: skips, halves, then trains -----------------------
heavy="base_lr: 0.000001 max_iter: 16 display: 4 snapshot: 4"
solver "$dir/heavy.prototxt" dyn "$heavy" >"$dir/dyn.prototxt"
solver "$dir/heavy.prototxt" init "base_lr: 0.000001 max_iter: 0" >"$dir/init.prototxt"
"$bin" train --solver="$dir/dyn.prototxt" --loss_scale=dynamic:1e36 --loss_scale_window=3 \
  --csv_log="$dir/dyn.csv" >"$dir/dyn.log" 2>&1
"$bin" train --solver="$dir/init.prototxt" >"$dir/init.log" 2>&1
skips=$(grep -c "the gradient overflowed: update skipped" "$dir/dyn.log" || true)
want="Iteration 0: the gradient overflowed: update skipped (1 so far), loss scale now 5e+35"
if [ "$skips" -ge 2 ] && grep -qF "$want" "$dir/dyn.log"; then
  ok "dynamic: $skips overflowing updates skipped, the scale halved each time"
else bad "dynamic: skip lines ($skips)"; fi
# the 5 first updates overflow (1e36 x 10000 down to 3.125e34 x 10000): the
# weights at iteration 4 are the initial ones
if cmp -s "$dir/init_iter_0.caffemodel" "$dir/dyn_iter_4.caffemodel"; then
  ok "dynamic: skipped updates leave the weights alone"
else bad "dynamic: weights changed by skipped updates"; fi
last=$(grep -o "loss = [0-9.e+-]*$" "$dir/dyn.log" | tail -1 | cut -d' ' -f3)
first=$(grep -o "loss = [0-9.e+-]*$" "$dir/dyn.log" | head -1 | cut -d' ' -f3)
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'; then
  ok "dynamic: trains after the backoff (loss $first -> $last)"
else bad "dynamic: the loss did not go down ($first -> $last)"; fi
if [ "$(sed -n 2p "$dir/dyn.csv" | awk -F, '{ print $(NF-1) "," $NF }')" = "loss_scale,skipped_updates" ] &&
   [ "$(tail -1 "$dir/dyn.csv" | awk -F, '{ print $NF }')" = "$skips" ]; then
  ok "dynamic: the CSV log has the scale and the skipped updates"
else bad "dynamic: CSV columns"; cat "$dir/dyn.csv"; fi

# ---- clean updates double the scale -------------------------------------------
solver "$dir/net.prototxt" grow "base_lr: 0.01 max_iter: 9 display: 3" >"$dir/grow.prototxt"
"$bin" train --solver="$dir/grow.prototxt" --loss_scale=dynamic:1024 --loss_scale_window=3 >"$dir/grow.log" 2>&1
if grep -q "Iteration 3, loss scale = 2048 (0 updates skipped)" "$dir/grow.log" &&
   grep -q "Iteration 6, loss scale = 4096 (0 updates skipped)" "$dir/grow.log"; then
  ok "dynamic: doubled after each 3 clean updates"
else bad "dynamic: growth"; grep "loss scale" "$dir/grow.log"; fi

# ---- resume goes on exactly -----------------------------------------------------
"$bin" train --solver="$dir/dyn.prototxt" --loss_scale=dynamic:1e36 --loss_scale_window=3 \
  --snapshot="$dir/dyn_iter_4.solverstate" >"$dir/resume.log" 2>&1
cp "$dir/dyn_iter_16.caffemodel" "$dir/resumed_16.caffemodel"
"$bin" train --solver="$dir/dyn.prototxt" --loss_scale=dynamic:1e36 --loss_scale_window=3 >/dev/null 2>&1
scale_lines() { grep -o "Iteration [0-9]*[,:] .*\(loss scale\|skipped\).*" "$1" | grep -v "^Iteration [0-3][,:]"; }
if cmp -s "$dir/dyn_iter_16.caffemodel" "$dir/resumed_16.caffemodel" &&
   [ -n "$(scale_lines "$dir/resume.log")" ] &&
   [ "$(scale_lines "$dir/resume.log")" = "$(scale_lines "$dir/dyn.log")" ]; then
  ok "resume: the same weights and loss scale as a straight run"
else bad "resume differs"; grep "loss scale" "$dir/resume.log" "$dir/dyn.log"; fi

# ---- refusals ------------------------------------------------------------------
set +e
"$bin" train --solver="$dir/off.prototxt" --loss_scale=big >"$dir/e1.log" 2>&1; rc1=$?
"$bin" train --solver="$dir/off.prototxt" --loss_scale=dynamic --dp_mode=ssp >"$dir/e2.log" 2>&1; rc2=$?
set -e
if [ $rc1 -eq 2 ] && grep -qF -- "--loss_scale=big: give auto, dynamic, dynamic:N, off or a positive number N" "$dir/e1.log"; then
  ok "a bad --loss_scale is refused"; else bad "bad --loss_scale: rc $rc1"; cat "$dir/e1.log"; fi
if [ $rc2 -eq 2 ] && grep -qF -- "--loss_scale goes with --dp_mode=allreduce" "$dir/e2.log"; then
  ok "--loss_scale with parameter servers is refused"; else bad "ps: rc $rc2"; cat "$dir/e2.log"; fi
exit $fail
