#!/usr/bin/env bash
# upgrade_net_proto_text and upgrade_solver_proto_text on every Caffe fixture
# prototxt, and on an old V1 net and solver: the first run writes the current
# format, and running the command on its own output changes nothing.
set -euo pipefail
bin=$CORTADO_BIN
dir=$CORTADO_TMP/sh_upgrade_fixtures
rm -rf "$dir" && mkdir -p "$dir"
fail=0
idempotent() { # command, input, name
  local cmd=$1 in=$2 name=$3
  if ! "$bin" "$cmd" "$in" "$dir/$name.1" --log_level=2 >"$dir/$name.log" 2>&1; then
    echo "FAIL $name: $(tail -1 "$dir/$name.log")"; fail=1; return
  fi
  "$bin" "$cmd" "$dir/$name.1" "$dir/$name.2" --log_level=2
  if cmp -s "$dir/$name.1" "$dir/$name.2"; then echo "ok   $name"; else echo "FAIL $name: not idempotent"; fail=1; fi
}
n=0
for f in "$CORTADO_FIXTURES"/*.prototxt; do
  b=$(basename "$f" .prototxt)
  case $b in *solver*) idempotent upgrade_solver_proto_text "$f" "$b" ;;
             *) idempotent upgrade_net_proto_text "$f" "$b" ;; esac
  n=$((n + 1))
done
# V1 layers and an enum solver type are rewritten in the current form.
cat > "$dir/v1.prototxt" <<'NET'
name: "v1"
input: "data"
input_dim: 1 input_dim: 1 input_dim: 8 input_dim: 8
layers { name: "conv" type: CONVOLUTION bottom: "data" top: "conv"
  blobs_lr: 1 blobs_lr: 2 convolution_param { num_output: 4 kernel_size: 3 } }
layers { name: "relu" type: RELU bottom: "conv" top: "conv" }
NET
idempotent upgrade_net_proto_text "$dir/v1.prototxt" v1
grep -q 'type: "Convolution"' "$dir/v1.1" && grep -q 'lr_mult: 2' "$dir/v1.1" && ! grep -q "layers {" "$dir/v1.1" \
  || { echo "FAIL v1: not upgraded"; cat "$dir/v1.1"; fail=1; }
printf 'net: "x.prototxt"\nbase_lr: 0.01\nsolver_type: ADAM\n' > "$dir/s.prototxt"
idempotent upgrade_solver_proto_text "$dir/s.prototxt" s
grep -q 'type: "Adam"' "$dir/s.1" && ! grep -q solver_type "$dir/s.1" || { echo "FAIL solver: not upgraded"; cat "$dir/s.1"; fail=1; }
# Caffe's lenet_consolidated_solver.prototxt: three inline V1 nets, upgraded
# by upgrade_solver_proto_text and by train (which used to refuse them with
# "V1 'layers' must be upgraded").
cons=$CORTADO_SRC/tests/data/caffe/lenet_consolidated_solver.prototxt
idempotent upgrade_solver_proto_text "$cons" consolidated
[ "$(grep -c '^  layer {' "$dir/consolidated.1")" -eq 29 ] && ! grep -q "layers {" "$dir/consolidated.1" &&
  grep -q 'type: "Convolution"' "$dir/consolidated.1" && grep -q 'lr_mult: 2' "$dir/consolidated.1" &&
  grep -q 'type: "SoftmaxWithLoss"' "$dir/consolidated.1" \
  || { echo "FAIL consolidated: inline nets not upgraded"; fail=1; }
sed -e 's/^max_iter:.*/max_iter: 20/' -e 's/^test_interval:.*/test_interval: 10/' \
    -e 's/^test_iter:.*/test_iter: 2/' -e 's/^display:.*/display: 10/' -e 's/^snapshot:.*/snapshot: 0/' \
    "$cons" >"$dir/cons_short.prototxt"
mkdir -p "$dir/examples/mnist"
if (cd "$dir" && "$bin" train --solver=cons_short.prototxt --cpu --dummy_data --dummy_shape=1,28,28 \
      >"$dir/cons_train.log" 2>&1) &&
   grep -qF "cons_short.prototxt: train_net_param: upgrading 9 V1 layers" "$dir/cons_train.log" &&
   grep -qF "Test net output #0: accuracy = " "$dir/cons_train.log" &&
   grep -qF "Iteration 20, loss = " "$dir/cons_train.log"; then
  echo "ok   training from the consolidated solver"
else
  echo "FAIL training from the consolidated solver:"; tail -3 "$dir/cons_train.log"; fail=1
fi
echo "$n fixture files"
[ "$n" -ge 20 ] || { echo "FAIL: only $n fixture files"; fail=1; }
exit $fail
