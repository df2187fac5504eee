#!/usr/bin/env bash
# `--dummy_data` takes a data layer's sample shape from --dummy_shape when
# given (saying so when the layer's own differs), else from its parameters
# (batch_size, crop_size, mean_value) and its source when that exists, and
# names the source and why it cannot be read when nothing gives the shape;
# labels are spread over the classes of the loss that reads them.
set -euo pipefail
bin=$CORTADO_BIN
dir=$CORTADO_TMP/sh_dummy_data
rm -rf "$dir" && mkdir -p "$dir"
"$bin" make_synthetic_db "$dir/db" --num=4 --shape=3,20,24 --encode_type=jpg --log_level=1
net() { # $1 = source, $2 = extra transform_param
  cat <<NET
name: "t"
layer { name: "d" type: "Data" top: "data" top: "label"
  transform_param { $2 }
  data_param { source: "$1" batch_size: 8 backend: LMDB } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 3 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
NET
}
fail=0
check() { # description, expected text, command...
  local what=$1 want=$2; shift 2
  local out
  out=$("$@" 2>&1) || true
  if grep -qF -- "$want" <<<"$out"; then echo "ok   $what"; else echo "FAIL $what: wanted '$want', got:"; echo "$out" | tail -3; fail=1; fi
}
net "$dir/db" "" > "$dir/a.prototxt"
check "shape from the source" "DummyData 8 x 3 x 20 x 24" \
  "$bin" time --model="$dir/a.prototxt" --dummy_data --iterations=1
net "$dir/db" "crop_size: 16" > "$dir/b.prototxt"
check "crop_size overrides the source's size" "DummyData 8 x 3 x 16 x 16" \
  "$bin" time --model="$dir/b.prototxt" --dummy_data --iterations=1
check "labels spread over the classes of the loss" \
  "DummyData 8 x 3 x 20 x 24, labels spread over the 3 classes of ip (read by loss)" \
  "$bin" time --model="$dir/a.prototxt" --dummy_data --iterations=1
check "an explicit --dummy_shape is obeyed" "--dummy_shape=1,5,6 replaces the shape 3,20,24 of its source and parameters" \
  "$bin" time --model="$dir/a.prototxt" --dummy_data --dummy_shape=1,5,6 --iterations=1
check "an explicit --dummy_shape is obeyed (the net)" "DummyData 8 x 1 x 5 x 6" \
  "$bin" time --model="$dir/a.prototxt" --dummy_data --dummy_shape=1,5,6 --iterations=1
net "$dir/missing" "" > "$dir/c.prototxt"
check "no source, no --dummy_shape: the source and why" \
  "cortado: error: --dummy_data: cannot tell the sample shape of layer 'd' (Data): $dir/missing: cannot open LMDB for reading: No such file or directory, and the layer gives no crop_size; give --dummy_shape=C,H,W" \
  "$bin" time --model="$dir/c.prototxt" --dummy_data --iterations=1
net "$dir/missing" "crop_size: 16" > "$dir/d.prototxt"
check "crop_size without a source: the shape" "DummyData 8 x 3 x 16 x 16" \
  "$bin" time --model="$dir/d.prototxt" --dummy_data --iterations=1
check "crop_size without a source: 3 channels, said" \
  "layer d (Data): 3 channels assumed (its source cannot be read: $dir/missing: cannot open LMDB for reading: No such file or directory); give --dummy_shape=C,H,W for others" \
  "$bin" time --model="$dir/d.prototxt" --dummy_data --iterations=1
net "$dir/missing" "crop_size: 12 mean_value: 128" > "$dir/e.prototxt"
check "one mean_value: one channel" "DummyData 8 x 1 x 12 x 12" \
  "$bin" time --model="$dir/e.prototxt" --dummy_data --iterations=1
check "--dummy_shape fills in" "DummyData 8 x 1 x 5 x 6" \
  "$bin" time --model="$dir/c.prototxt" --dummy_data --dummy_shape=1,5,6 --iterations=1
check "bad --dummy_shape" "--dummy_shape=1,5: expected three positive integers C,H,W" \
  "$bin" time --model="$dir/c.prototxt" --dummy_data --dummy_shape=1,5 --iterations=1
exit $fail
