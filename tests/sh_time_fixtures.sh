#!/usr/bin/env bash
# Every net under the Caffe fixtures builds and `cortado time --dummy_data`
# runs on it on the CPU (one timed iteration): the data layers are replaced by
# DummyData of the shape they would produce.  Under the sanitizers only the
# small nets run (the ImageNet ones take minutes there).
set -euo pipefail
F=$CORTADO_FIXTURES
bin=$CORTADO_BIN
fail=0
# net file, sample shape C,H,W for its data layer (crop_size overrides H,W)
nets=(
  "lenet.prototxt -"
  "lenet_train_test.prototxt 1,28,28"
  "mnist_autoencoder.prototxt 1,28,28"
  "mnist_siamese_train_test.prototxt 2,28,28"
  "cifar10_quick_train_test.prototxt 3,32,32"
  "cifar10_full_train_test.prototxt 3,32,32"
  "cifar10_full_sigmoid_train_test_bn.prototxt 3,32,32"
  "bvlc_alexnet_deploy.prototxt -"
  "bvlc_reference_caffenet_deploy.prototxt -"
  "bvlc_googlenet_train_val.prototxt 3,224,224"
  "bvlc_alexnet_train_val.prototxt 3,227,227"
  "bvlc_reference_caffenet_train_val.prototxt 3,227,227"
)
seen=0
for entry in "${nets[@]}"; do
  set -- $entry
  net=$1 shape=$2
  case $net in bvlc_*) [ "${CORTADO_SANITIZED:-0}" = 1 ] && { echo "skip under sanitizers: $net"; seen=$((seen+1)); continue; } ;; esac
  args=(time --model="$F/$net" --iterations=1 --log_level=1)
  [ "$shape" != - ] && args+=(--dummy_data --dummy_shape="$shape")
  start=$SECONDS
  if out=$("$bin" "${args[@]}" 2>&1); then
    echo "ok   $net ($((SECONDS - start)) s)"
  else
    echo "FAIL $net: $out" | tail -5
    fail=1
  fi
  seen=$((seen+1))
done
# every net prototxt in the folder is in the list above
for f in "$F"/*.prototxt; do
  b=$(basename "$f")
  case $b in *solver*) continue ;; esac
  printf '%s\n' "${nets[@]}" | grep "^$b " >/dev/null || { echo "FAIL: $b is not covered"; fail=1; }
done
echo "$seen nets"
exit $fail
