#!/usr/bin/env bash
# The Caffe2-style CSV training log end to end: `cortado train --csv_log`
# on a tiny net (rows parse, counts add up, epochs from the database size,
# test_accuracy -1 without a test net), and `cortado resnet50_trainer` on a
# tiny synthetic LMDB (the CSV, a ResNet-50 net, flag errors).
set -euo pipefail
bin=$CORTADO_BIN
dir=$CORTADO_TMP/sh_csv_log
rm -rf "$dir" && mkdir -p "$dir"
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
header="time_spent,cumulative_time_spent,input_count,cumulative_input_count,cumulative_batch_count,inputs_per_sec,accuracy,epoch,learning_rate,loss,test_accuracy"

# check_rows FILE BATCH EPOCH_SIZE: every row has 11 fields, the batch and
# input counts agree, the input counts add up, epochs follow the inputs.
check_rows() {
  awk -F, -v batch="$2" -v esize="$3" '
    NR == 1 { if ($0 !~ /^# Namespace\(/) { print "first line: " $0; bad = 1 }; next }
    NR == 2 { next }
    {
      if (NF != 11) { print "row " NR ": " NF " fields"; bad = 1 }
      if ($4 != $5 * batch) { print "row " NR ": cumulative_input_count " $4 " != " $5 " x " batch; bad = 1 }
      sum += $3
      if ($4 != sum) { print "row " NR ": input counts add to " sum ", cumulative says " $4; bad = 1 }
      if ($2 + 1e-6 < $1) { print "row " NR ": cumulative time below the time spent"; bad = 1 }
      want = esize > 0 ? int(($4 - 1) / esize) : -1
      if ($8 != want) { print "row " NR ": epoch " $8 ", expected " want; bad = 1 }
    }
    END { exit bad }' "$1"
}

# ---- cortado train --csv_log -------------------------------------------------
"$bin" make_synthetic_db "$dir/db" --num=10 --shape=1,6,6 --labels=3 --log_level=1
cat >"$dir/net.prototxt" <<NET
name: "tiny"
layer { name: "d" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { scale: 0.00390625 }
  data_param { source: "$dir/db" batch_size: 4 backend: LMDB } }
layer { name: "d" type: "Data" top: "data" top: "label" include { phase: TEST }
  transform_param { scale: 0.00390625 }
  data_param { source: "$dir/db" batch_size: 5 backend: LMDB } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "ip" bottom: "label" top: "accuracy"
  include { phase: TEST } }
NET
solver() { # $1 = extra fields
  printf 'net: "%s"\nbase_lr: 0.01\nlr_policy: "fixed"\nmax_iter: 6\ndisplay: 2\nmomentum: 0.9\nrandom_seed: 1\nsolver_mode: CPU\n%s\n' \
    "$dir/net.prototxt" "$1"
}
solver "test_iter: 2 test_interval: 4 test_initialization: false" >"$dir/with_test.prototxt"
solver "" >"$dir/no_test.prototxt"

"$bin" train --solver="$dir/with_test.prototxt" --csv_log="$dir/train.csv" --log_level=1
f=$dir/train.csv
if [ "$(sed -n 2p "$f")" = "$header" ]; then ok "train: header"; else bad "train: header is '$(sed -n 2p "$f")'"; fi
if head -1 "$f" | grep -F "solver='$dir/with_test.prototxt'" >/dev/null; then ok "train: parameters line"; else bad "train: parameters line '$(head -1 "$f")'"; fi
if [ "$(tail -n +3 "$f" | cut -d, -f5 | tr '\n' ' ')" = "2 4 6 " ]; then ok "train: a row per display"; else bad "train: rows:"; cat "$f"; fi
if check_rows "$f" 4 10; then ok "train: counts and epochs"; else bad "train: counts and epochs"; fi
# tests run at iteration 4 only: -1 before, the accuracy after; no train accuracy
if [ "$(tail -n +3 "$f" | awk -F, '{printf "%s|%s ", $7, ($11 == -1 ? "none" : ($11 >= 0 && $11 <= 1 ? "acc" : $11))}')" = "-1|none -1|acc -1|acc " ]; then
  ok "train: accuracy and test_accuracy columns"
else
  bad "train: accuracy columns:"; cat "$f"
fi
if [ "$(tail -n +3 "$f" | cut -d, -f9 | sort -u)" = "0.01" ]; then ok "train: learning_rate"; else bad "train: learning_rate"; fi

"$bin" train --solver="$dir/no_test.prototxt" --csv_log="$dir/logs/" --log_level=1
f=$(ls "$dir"/logs/*.csv 2>/dev/null || true)
if [[ "$(basename "$f")" =~ ^no_test_gpu0_lr0\.01_[0-9]{8}_[0-9]{6}\.csv$ ]]; then ok "train: generated name"; else bad "train: generated name '$f'"; fi
if [ -n "$f" ] && [ "$(tail -n +3 "$f" | cut -d, -f11 | sort -u)" = "-1" ] && check_rows "$f" 4 10; then
  ok "train: test_accuracy -1 without a test net"
else
  bad "train: rows without a test net"
fi
out=$("$bin" train --solver="$dir/no_test.prototxt" --csv_log="$dir/none/x/y.csv" 2>&1) && bad "train: unwritable --csv_log ran" || true
if grep -qF -- "--csv_log: CSV log $dir/none/x/y.csv: cannot create the file" <<<"$out"; then ok "train: unwritable --csv_log"; else bad "train: unwritable --csv_log: $out"; fi

# ---- cortado resnet50_trainer -------------------------------------------------
"$bin" make_synthetic_db "$dir/rtrain" --num=8 --shape=3,36,36 --labels=4 --encode_type=jpg --log_level=1
"$bin" make_synthetic_db "$dir/rtest" --num=4 --shape=3,36,36 --labels=4 --encode_type=jpg --seed=2 --log_level=1
"$bin" resnet50_trainer --train_data="$dir/rtrain" --test_data="$dir/rtest" --image_size=32 --num_labels=4 \
  --batch_size=2 --epoch_size=5 --num_epochs=1 --test_iter=1 --csv_log="$dir/r/" \
  --write_net="$dir/resnet.prototxt" --log_level=1
f=$(ls "$dir"/r/*.csv 2>/dev/null || true)
if [[ "$(basename "$f")" =~ ^resnet50_gpu0_b2_L4_lr0\.10_[0-9]{8}_[0-9]{6}\.csv$ ]]; then ok "resnet50_trainer: Caffe2's file name"; else bad "resnet50_trainer: file name '$f'"; fi
if [ -n "$f" ] && [ "$(sed -n 2p "$f")" = "$header" ] && head -1 "$f" | grep -F "Namespace(base_learning_rate=0.1, batch_size=2, " >/dev/null; then
  ok "resnet50_trainer: parameters and header"
else
  bad "resnet50_trainer: first lines"
fi
# epoch_size 5 rounds down to 4 (2 iterations of 2); one row, for epoch 0;
# the rate is 0.1 x 2 / 256
row=$(tail -n +3 "$f" | awk -F, '{printf "%s %s %s %s %s %s|", $3, $4, $5, $8, $9, ($7 >= 0 && $7 <= 1 && $11 >= 0 && $11 <= 1) ? "acc" : "no"}')
if [ "$row" = "4 4 2 0 0.00078125 acc|" ]; then ok "resnet50_trainer: one row per epoch"; else bad "resnet50_trainer: rows '$row'"; cat "$f"; fi
convs=$(grep -c 'type: "Convolution"' "$dir/resnet.prototxt")
bns=$(grep -c 'type: "BatchNorm"' "$dir/resnet.prototxt")
last_ip=$(awk '/type: "InnerProduct"/ {on = 1} on && /num_output/ {n = $2} END {print n}' "$dir/resnet.prototxt")
if [ "$convs $bns $last_ip" = "53 53 4" ]; then ok "resnet50_trainer: ResNet-50"; else bad "resnet50_trainer: net has $convs convolutions, $bns BatchNorm, $last_ip outputs"; fi

check_error() { # description, expected text, flags...
  local what=$1 want=$2 rc=0 out
  shift 2
  out=$("$bin" resnet50_trainer "$@" 2>&1) || rc=$?
  if [ "$rc" -ne 0 ] && grep -qF -- "$want" <<<"$out"; then ok "$what"; else bad "$what: rc $rc, wanted '$want', got: $out"; fi
}
check_error "no --train_data" "--train_data=DB is required"
check_error "batch not divisible" "--batch_size=10 is the total over the GPUs, and 3 GPUs do not divide it" \
  --train_data="$dir/rtrain" --num_gpus=3 --batch_size=10
check_error "--gpus and --num_gpus disagree" "--gpus=0,1 names 2 GPUs but --num_gpus=3" \
  --train_data="$dir/rtrain" --gpus=0,1 --num_gpus=3
check_error "epoch below a batch" "--epoch_size=3 is smaller than one global batch (4 = --batch_size x --num_shards)" \
  --train_data="$dir/rtrain" --batch_size=2 --num_shards=2 --run_id=r --epoch_size=3
check_error "shard id out of range" "--shard_id=2: must be below --num_shards=2" \
  --train_data="$dir/rtrain" --num_shards=2 --shard_id=2 --run_id=r
check_error "shards need a run id" "--num_shards=2 needs --run_id" --train_data="$dir/rtrain" --num_shards=2
check_error "unknown db type" "--db_type" --train_data="$dir/rtrain" --db_type=rocksdb
exit $fail
