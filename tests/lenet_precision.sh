# Sourced by sh_lenet_bf16.sh and sh_gpu_lenet_precision.sh: BVLC's LeNet
# solver on Fashion-MNIST (Debian's dataset-fashion-mnist, converted here),
# 2000 iterations at random seeds 1 and 2, in float32 and in a 16-bit type;
# the 16-bit runs' mean final test accuracy must be within 0.3% (0.003) of
# the float32 runs' mean.  Needs CORTADO_BIN, CORTADO_SRC, CORTADO_TMP.
#   lenet_precision DIR DEVICE_FLAG PRECISION [REFERENCE_PRECISION]
lenet_data() {
  local dir=$1 fm=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
  if [ ! -e "$fm/train-images-idx3-ubyte.gz" ] && [ ! -e "$fm/train-images-idx3-ubyte" ]; then
    echo "no Fashion-MNIST in $fm (Debian's dataset-fashion-mnist): skipped"
    exit 77
  fi
  [ -f "$dir/net.prototxt" ] && return 0 # made by an earlier call
  local ext=""
  [ -e "$fm/train-images-idx3-ubyte.gz" ] && ext=.gz
  "$CORTADO_BIN" convert_mnist_data "$fm/train-images-idx3-ubyte$ext" "$fm/train-labels-idx1-ubyte$ext" \
    "$dir/train_lmdb" --log_level=1 >/dev/null
  "$CORTADO_BIN" convert_mnist_data "$fm/t10k-images-idx3-ubyte$ext" "$fm/t10k-labels-idx1-ubyte$ext" \
    "$dir/test_lmdb" --log_level=1 >/dev/null
  sed -e "s#examples/fashion_mnist/fashion_mnist_train_lmdb#$dir/train_lmdb#" \
      -e "s#examples/fashion_mnist/fashion_mnist_test_lmdb#$dir/test_lmdb#" \
      "$CORTADO_SRC/examples/fashion_mnist/lenet_train_test.prototxt" >"$dir/net.prototxt"
}

# The final test accuracy of one run: lenet_run DIR SEED DEVICE_FLAG PRECISION
lenet_run() {
  local dir=$1 seed=$2 dev=$3 prec=$4
  sed -e "s#examples/fashion_mnist/lenet_train_test.prototxt#$dir/net.prototxt#" \
      -e "s#^snapshot_prefix.*#snapshot_prefix: \"$dir/lenet\"#" -e "s#^snapshot:.*#snapshot: 0#" \
      -e "s#^test_interval.*#test_interval: 2000#" \
      "$CORTADO_SRC/examples/fashion_mnist/lenet_solver.prototxt" >"$dir/solver_$seed.prototxt"
  echo "random_seed: $seed" >>"$dir/solver_$seed.prototxt"
  "$CORTADO_BIN" train --solver="$dir/solver_$seed.prototxt" $dev --precision="$prec" \
    >"$dir/train_${prec}_$seed.log" 2>&1 || { tail -20 "$dir/train_${prec}_$seed.log" >&2; return 1; }
  grep "Test net output #0: accuracy" "$dir/train_${prec}_$seed.log" | tail -1 | sed 's/.*= //'
}

lenet_precision() {
  local dir=$1 dev=$2 prec=$3 ref=${4:-fp32}
  lenet_data "$dir"
  local a1 a2 r1 r2
  r1=$(lenet_run "$dir" 1 "$dev" "$ref")
  r2=$(lenet_run "$dir" 2 "$dev" "$ref")
  a1=$(lenet_run "$dir" 1 "$dev" "$prec")
  a2=$(lenet_run "$dir" 2 "$dev" "$prec")
  grep -q "Precision $(case $prec in bf16) echo bfloat16;; fp16) echo float16;; esac)" \
    "$dir/train_${prec}_1.log" || { echo "FAIL: the $prec run did not say its precision"; return 1; }
  echo "$ref: $r1 $r2   $prec: $a1 $a2"
  awk -v r1="$r1" -v r2="$r2" -v a1="$a1" -v a2="$a2" -v p="$prec" -v q="$ref" 'BEGIN {
    r = (r1 + r2) / 2; a = (a1 + a2) / 2; d = r - a;
    printf "mean %s %.4f, mean %s %.4f, %s behind by %.4f (at most 0.003)\n", q, r, p, a, p, d;
    if (r < 0.85 || d > 0.003) exit 1 }'
}
