#!/usr/bin/env bash
# A layer with parameters that gets no weights from a weights file (the net's
# layer renamed, as fine-tuning does on purpose and a typo does by accident)
# keeps its random initial weights: `cortado train --weights` warns (an error
# with --strict_weights), `cortado test` refuses to score random weights
# unless --allow_missing_weights.  Exact messages; the exit statuses.
set -euo pipefail
bin=$CORTADO_BIN
dir=$CORTADO_TMP/sh_weights_missing
rm -rf "$dir" && mkdir -p "$dir"
cd "$dir"
net() { # $1 = the second InnerProduct's name
  cat <<NET
name: "w"
layer { name: "data" type: "DummyData" top: "x" top: "y"
  dummy_data_param { shape { dim: 4 dim: 6 } shape { dim: 4 dim: 3 }
    data_filler { type: "constant" value: 0.5 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
  inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
layer { name: "$1" type: "InnerProduct" bottom: "h" top: "p"
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "p" bottom: "y" top: "loss" }
NET
}
solver() { # $1 = net file, $2 = prefix
  printf 'net: "%s"\nbase_lr: 0.01\nlr_policy: "fixed"\nmax_iter: 2\nsnapshot_prefix: "%s"\nrandom_seed: 3\nsolver_mode: CPU\n' "$1" "$2"
}
net ip2 > a.prototxt
net fc2 > b.prototxt
solver a.prototxt a > a_solver.prototxt
solver b.prototxt b > b_solver.prototxt
"$bin" train --solver=a_solver.prototxt --log_level=1
test -f a_iter_2.caffemodel

fail=0
expect() { # description, wanted exit status, wanted text (a whole line of the output, or ""), command...
  local what=$1 want_rc=$2 want=$3; shift 3
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  if [ "$rc" != "$want_rc" ]; then
    echo "FAIL $what: exit status $rc, wanted $want_rc"; echo "$out" | tail -3; fail=1
  elif [ -n "$want" ] && ! grep -qxF -- "$want" <<<"$out" && ! grep -qF -- "] $want" <<<"$out"; then
    echo "FAIL $what: no line '$want' in:"; echo "$out" | tail -4; fail=1
  else
    echo "ok   $what"
  fi
}
missing="layer 'fc2' (InnerProduct, 2 blobs) got no weights; its parameters stay as the fillers made them (renamed? the file has 'ip2' that this net has not)"
expect "test: every layer filled" 0 "" \
  "$bin" test --model=a.prototxt --weights=a_iter_2.caffemodel --iterations=1
expect "test: a renamed layer is an error" 1 \
  "cortado: error: --weights a_iter_2.caffemodel: $missing; --allow_missing_weights scores it anyway" \
  "$bin" test --model=b.prototxt --weights=a_iter_2.caffemodel --iterations=1
expect "test --allow_missing_weights scores it, with a warning" 0 \
  "--weights a_iter_2.caffemodel: $missing" \
  "$bin" test --model=b.prototxt --weights=a_iter_2.caffemodel --iterations=1 --allow_missing_weights
expect "train --weights: a warning" 0 \
  "--weights a_iter_2.caffemodel: $missing; --strict_weights makes this an error" \
  "$bin" train --solver=b_solver.prototxt --weights=a_iter_2.caffemodel
expect "train --weights --strict_weights: an error" 1 \
  "cortado: error: --weights a_iter_2.caffemodel: $missing" \
  "$bin" train --solver=b_solver.prototxt --weights=a_iter_2.caffemodel --strict_weights
expect "train: the same net, no warning" 0 "" \
  "$bin" train --solver=a_solver.prototxt --weights=a_iter_2.caffemodel --strict_weights
if "$bin" train --solver=a_solver.prototxt --weights=a_iter_2.caffemodel 2>&1 | grep "got no weights" >/dev/null; then
  echo "FAIL a warning for a net that got all its weights"; fail=1
fi
exit $fail
