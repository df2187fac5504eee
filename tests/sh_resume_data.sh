#!/usr/bin/env bash
# Resume is exact with a real Data layer: 10 iterations straight equal 5
# iterations, a snapshot, and a resumed run to 10 — the same losses at every
# iteration after the snapshot and the same final weights, byte for byte —
# because the solverstate keeps each data layer's position in its LMDB (and
# the RNG state).  RESUME_DEVICE=gpu runs it on GPU 0 (where the batch of
# the next iteration is already staged on the device when the snapshot is
# taken), gpu2 on GPUs 0 and 1 (two worker processes); sh_gpu_resume_data.sh
# does both.
set -euo pipefail
bin=$CORTADO_BIN
device=${RESUME_DEVICE:-cpu}
case $device in
  cpu) mode=CPU flags=() ;;
  gpu) mode=GPU flags=(--gpu=0) ;;
  gpu2) mode=GPU flags=(--gpu=0,1) ;;
  *) echo "RESUME_DEVICE=$device: cpu, gpu or gpu2" >&2; exit 2 ;;
esac
dir=$CORTADO_TMP/sh_resume_data_$device
rm -rf "$dir" && mkdir -p "$dir"
cd "$dir"
"$bin" make_synthetic_db db --num=23 --shape=3,8,8 --labels=4 --log_level=1
cat > net.prototxt <<'NET'
name: "resume"
layer { name: "data" type: "Data" top: "data" top: "label"
  transform_param { scale: 0.0039 mirror: true crop_size: 6 }
  data_param { source: "db" batch_size: 4 backend: LMDB } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "drop" type: "Dropout" bottom: "ip" top: "ip" dropout_param { dropout_ratio: 0.3 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
NET
solver() { # $1 = max_iter, $2 = prefix
  cat <<SOLVER
net: "net.prototxt"
base_lr: 0.1
momentum: 0.9
lr_policy: "fixed"
display: 1
max_iter: $1
snapshot: 5
snapshot_prefix: "$2"
random_seed: 17
solver_mode: $mode
SOLVER
}
solver 10 straight > straight.prototxt
solver 5 first > first.prototxt
solver 10 second > second.prototxt
"$bin" train --solver=straight.prototxt "${flags[@]}" > straight.log 2>&1
"$bin" train --solver=first.prototxt "${flags[@]}" > first.log 2>&1
"$bin" train --solver=second.prototxt --snapshot=first_iter_5.solverstate "${flags[@]}" > second.log 2>&1
losses() { grep -oE "Iteration ([6-9]|10) \(.*loss = [-0-9.e+]+" "$1" | sed 's/ (.*),//'; }
fail=0
if [ "$(losses straight.log)" != "$(losses second.log)" ] || [ -z "$(losses second.log)" ]; then
  echo "FAIL: losses after the resume differ"; paste <(losses straight.log) <(losses second.log); fail=1
else
  echo "ok   ($device) losses of iterations 6-10 equal: $(losses second.log | tr '\n' ';')"
fi
if cmp -s straight_iter_10.caffemodel second_iter_10.caffemodel; then
  echo "ok   ($device) final weights equal byte for byte"
else
  echo "FAIL: final weights differ"; fail=1
fi
exit $fail
